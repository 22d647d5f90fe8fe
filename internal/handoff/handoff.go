// Package handoff is how the outbox's parts pass events to each other: the
// publishing client hands committed events to the dispatcher's hot queue,
// the poller hands claimed rows to its cold queue. The parts are public
// packages; the hand-off between them is not part of their API.
package handoff

import (
	"time"

	"github.com/outbox-go/outbox/core"
)

// Hot is the dispatcher's intake of committed events for one store.
type Hot interface {
	// HotLease returns the lease to insert env with, so that the
	// dispatcher owns the row from the insert on; the zero lease (the row
	// is unowned, any poller takes it) once the dispatcher is closed.
	HotLease(env core.Envelope) core.Lease
	// EnqueueHot offers an event whose transaction committed, inserted
	// with lease. It never blocks; false means not taken (the row waits
	// for the poller).
	EnqueueHot(env core.Envelope, lease core.Lease) bool
}

// Skipper is implemented by a Hot intake that counts the events it let go
// (the dispatcher's, see ReleaseCounter): the publishing client calls
// SkipHot when it does not hand over events inserted with the intake's
// lease (it could not read back whether their rows were kept), so that
// this node's next claim takes its own rows again instead of leaving
// them until the lease ends.
type Skipper interface {
	SkipHot()
}

// Cold is the dispatcher's intake of claimed rows for one store.
type Cold interface {
	// ClaimLease returns the lease to claim rows with at now.
	ClaimLease(now time.Time) core.Lease
	// ClaimMark returns the mark to pass to EnqueueCold for the rows of a
	// claim about to read them.
	ClaimMark() uint64
	// EnqueueCold offers a claimed event without blocking; false means
	// not taken: the queue is full, or the dispatcher holds the event, or
	// let it go after mark (the claim read the row while the event was
	// still held here: a stale copy).
	// created is the row's insert time (for the Observer's commit to
	// listener latency); seq the row's position among the events of its
	// ordering key (core.Record.OrderSeq, 0 for an unordered event);
	// redelivered whether the row tells that the event was handed to
	// listeners before (core.Delivery.Redelivered).
	EnqueueCold(env core.Envelope, attempts int, leaseUntil, created time.Time, mark uint64, seq int64, redelivered bool) bool
	// ColdRoom returns how many events the cold queue can take now.
	ColdRoom() int
	// InFlight reports whether the event is held by the dispatcher.
	InFlight(eventID string) bool
	// QueueDepths returns the hot and cold queue lengths (for metrics).
	QueueDepths() (hot, cold int)
	// Held returns how many of the store's events the dispatcher holds.
	Held() int
}

// RoomNotifier is implemented by a Cold intake that can say when its
// queue has room again (the dispatcher's does), so that a poller facing a
// full queue claims again as soon as the workers made room instead of
// after a fixed pause.
type RoomNotifier interface {
	// NotifyRoom arms a one-shot notice: fn runs once the cold queue
	// holds at most half its capacity and the dispatcher's MaxHeldBytes
	// has room for an event of the usual size, at once (on the caller's
	// goroutine) if it already does, else on the goroutine that made it
	// so (a worker taking an event, or an event leaving memory). fn must
	// not block. Every fn armed before the notice runs then; arm again
	// for the next one.
	NotifyRoom(fn func())
}

// ReleaseCounter is implemented by a Cold intake that counts the events
// it let go without an outcome (the dispatcher's does): a hot event
// dropped by a full queue, a claimed row the cold queue could not take,
// an event handed back at shutdown or by a full retry capacity. Their
// rows stay leased by this node, and only this node's claims take them
// before the lease ends. While the count has not moved since a claim
// that took this node's rows, every such row is held by the dispatcher:
// a poller then claims only rows of no owner or of an expired lease
// (core.ClaimRequest.SkipOwn), so its claims are not filled with the rows
// it holds already, the oldest ones, while it drains a backlog (unless
// one of the events it holds may be taken again: see TTLReporter).
type ReleaseCounter interface {
	// Released returns how many events were let go without an outcome
	// so far.
	Released() uint64
}

// TimerReporter is implemented by a Cold intake that holds events on
// timers (the dispatcher's: in-process retries and delayed events). Those
// rows are not due, so a claim does not read them: a poller that claims
// past the rows held here counts only the others.
type TimerReporter interface {
	// OnTimers returns how many of the store's held events wait on a
	// timer (part of Held).
	OnTimers() int
}

// TTLReporter is implemented by a Cold intake whose held events may be
// taken again once held too long (the dispatcher's, with InFlightTTL).
// Such an event's row is leased by this node, so only this node's claims
// read it before the lease ends: while one is held past the TTL, a poller
// claims this node's rows too, though the ReleaseCounter has not moved,
// so that the event is queued once more.
type TTLReporter interface {
	// HeldPastTTL reports whether one of the store's events has been
	// held for the TTL or longer, and may be taken again.
	HeldPastTTL() bool
}

// Queue is both intakes of one store.
type Queue interface {
	Hot
	Cold
	// HotWaiting reports whether an event handed to the hot queue (of any
	// store) has not been taken by a worker yet: a writer of a
	// single-writer database then yields to the delivery.
	HotWaiting() bool
}

// Of returns the intake of the store id of d, a *dispatcher.Dispatcher:
// "" is the store given to dispatcher.New, another id one added with
// AddStore. It is nil when d has no such store. Package dispatcher sets it
// when it is initialized.
var Of func(d any, id string) Queue

// WakeStore makes p, a *poller.Poller serving several stores, poll store
// id next, at once and without its SkipRecent: package tenant calls it
// when that store's database announces a committed event. It never
// blocks. Package poller sets it when it is initialized.
var WakeStore func(p any, id string)

// FreshStart makes p, a *poller.Poller not started yet, take the rows
// published before its loop began (or before a store joined it, for a
// store added later) however recent, over as many polls as they fill:
// SkipRecent applies to younger rows only. Those a Close released, or
// published unowned, just before a restart waited a whole Interval; a
// row the dispatcher holds already (a hot-path event published before
// Start) is not delivered twice. Set by package poller.
var FreshStart func(p any)

// OnKeyFreed makes d, a *dispatcher.Dispatcher, call fn after ordered
// events of its store id ("" for the store given to dispatcher.New)
// finished (DONE written, or DEAD under the skip policy): the next event
// of each key may be claimable now, so the wiring has the store's poller
// claim it (Successors). fn gets the positions after which an event is
// to be claimed when the store claims by position
// (core.SuccessorClaimer), else nil: the poller then makes a full claim.
// fn must not block. Package dispatcher sets it when it is initialized.
var OnKeyFreed func(d any, id string, fn func(after []core.OrderPos))

// Successors returns the function that hands finished ordered events to
// p, a *poller.Poller, for store id: p claims the event after each
// position (core.SuccessorClaimer) at once, or makes a full claim of the
// store when after is nil. It never blocks. Package poller sets it when
// it is initialized.
var Successors func(p any, id string) func(after []core.OrderPos)

// OnPutOff makes d, a *dispatcher.Dispatcher, call fn with the time an
// event of its store id put off (core.Unavailable, a type without a
// listener left for later) comes due again: the wiring has the store's
// poller poll then (WakeAt) rather than at its next Interval. fn must
// not block. Package dispatcher sets it when it is initialized.
var OnPutOff func(d any, id string, fn func(at time.Time))

// WakeAt returns the function that makes p, a *poller.Poller, poll store
// id once the time it is given has come (without SkipRecent, as a
// wake-up). It never blocks. Package poller sets it when it is
// initialized.
var WakeAt func(p any, id string) func(at time.Time)

// Link has the dispatcher d tell the poller p when store id has rows to
// claim before p's next poll: the next events of ordered keys whose
// predecessors finished (OnKeyFreed, Successors), and events put off
// coming due (OnPutOff, WakeAt).
func Link(d, p any, id string) {
	OnKeyFreed(d, id, Successors(p, id))
	OnPutOff(d, id, WakeAt(p, id))
}
