package core

import (
	"context"
	"fmt"
	"time"
)

// InboxObserver watches an inbox at work, for tracing and metrics with
// labels: the OpenTelemetry and Prometheus modules of this repository
// implement it beside [Observer]. Set it in inbox.Config.Observer (the
// transactional mode, ProcessTx and Process) and
// inbox.DispatcherConfig.Observer (the work queue's handlers); nil means
// none, and then none of it costs anything.
//
// ProcessInbox is called before the business function or handler of one
// message runs, with the context it would get; the context it returns is
// the one it gets (carrying, for example, a consumer span): it must be ctx
// or derived from it. end is called exactly once, when the outcome is
// known. Like [Observer], it runs on the inbox's own paths: it must be
// fast, must not block and must be safe for concurrent use; and as the
// outbox's dispatcher does for Deliver, the inbox survives a ProcessInbox,
// or the end it returned, that panics (it logs the panic and processes
// the message unobserved), takes a nil context for ctx and a nil end for
// none.
type InboxObserver interface {
	ProcessInbox(ctx context.Context, m InboxMessage) (context.Context, func(InboxResult))
}

// InboxMode is how an inbox processes a message.
type InboxMode uint8

// The modes of an inbox.
const (
	// InboxTransactional: inbox.Inbox.ProcessTx (or Process) inside the
	// consumer's business transaction.
	InboxTransactional InboxMode = iota
	// InboxQueued: a handler run by an inbox.Dispatcher for a message
	// stored with Enqueue.
	InboxQueued
)

// String returns "transactional", "queued", or InboxMode(n) for another value.
func (m InboxMode) String() string {
	switch m {
	case InboxTransactional:
		return "transactional"
	case InboxQueued:
		return "queued"
	}
	return fmt.Sprintf("InboxMode(%d)", uint8(m))
}

// InboxMessage describes one processing of an inbox message, for an
// [InboxObserver].
type InboxMessage struct {
	// Source and MessageID are the message's natural key; Topic routes it
	// ("" when a transactional caller gave none).
	Source, MessageID, Topic string
	// Store is the inbox the message is in: "" for a dispatcher's own
	// inbox and for the transactional mode of a lone inbox, the id given
	// to AddInbox in a dispatcher of several, and the database's id, in
	// either mode, for an inbox of a tenant set (package tenant).
	Store string
	Mode  InboxMode
	// Attempt is 1 for a queued message's first handling, 2 for its
	// first retry, and so on (a claim that finds the attempts used up, and
	// marks the message Dead without running anything, reports one over
	// the dispatcher's MaxAttempts); 0 in the transactional mode, where the
	// inbox does not count attempts. A handling interrupted by shutdown
	// (InboxInterrupted) charges none and its row keeps no trace of it:
	// the next handling has the same Attempt, so an observer that
	// measures first handlings (the wait since Enqueued) counts that
	// message's wait again, the interruption included.
	Attempt int
	// Redelivered: a queued message that was claimed before and put off
	// for want of a handler (no attempt charged), so Attempt may be 1
	// though this is not its first handling. An observer that measures
	// first handlings leaves it out.
	Redelivered bool
	// Enqueued is when a queued message was first stored, or its DueAt
	// when later (zero in the transactional mode): the time from there to
	// the handler is the message's wait in the inbox, a delay asked for
	// left out.
	Enqueued time.Time
}

// InboxOutcome is what became of one processing of an inbox message.
type InboxOutcome uint8

// The outcomes of an inbox processing.
const (
	// InboxProcessed: the business function or handler succeeded and the
	// message is Done (in the transactional mode, once the caller's
	// transaction commits). The outcomes of the queued mode are the
	// dispatcher's decision, reported as it writes them: should the write
	// fail, or find the lease lost (the message claimed again after the
	// lease expired), the dispatcher logs it and the message is handled
	// again; the outcome reported stays.
	InboxProcessed InboxOutcome = iota
	// InboxDuplicate: the message was processed before; nothing ran.
	InboxDuplicate
	// InboxFailed (transactional mode): the business function failed, or
	// the inbox refused the message (for example another worker is
	// processing it); the caller's transaction should roll back.
	InboxFailed
	// InboxRetry (queued): the handler failed; the message is retried
	// after a backoff. (Transactional mode: a Process whose transaction
	// met lock contention, which Process runs again.)
	InboxRetry
	// InboxDead (queued): the handler failed on the last attempt; the
	// message is Dead.
	InboxDead
	// InboxUnhandled (queued): no handler is registered for the topic; the
	// message is put off (the inbox's DispatcherConfig.UnhandledDelay),
	// no attempt charged.
	InboxUnhandled
	// InboxInterrupted (queued): shutdown interrupted the handler; the
	// message is handled again later, no attempt charged.
	InboxInterrupted
)

// String returns "processed", "duplicate", "failed", "retry", "dead",
// "unhandled", "interrupted", or InboxOutcome(n) for another value.
func (o InboxOutcome) String() string {
	switch o {
	case InboxProcessed:
		return "processed"
	case InboxDuplicate:
		return "duplicate"
	case InboxFailed:
		return "failed"
	case InboxRetry:
		return "retry"
	case InboxDead:
		return "dead"
	case InboxUnhandled:
		return "unhandled"
	case InboxInterrupted:
		return "interrupted"
	}
	return fmt.Sprintf("InboxOutcome(%d)", uint8(o))
}

// InboxResult is the outcome of one processing, for an [InboxObserver].
type InboxResult struct {
	Outcome InboxOutcome
	// Err is the failure (nil for InboxProcessed and InboxDuplicate).
	Err error
	// Took is how long the business function or handler ran (zero when
	// none ran).
	Took time.Duration
	// NotRun reports that no business function or handler ran: the
	// processing ended before it (the message in progress under another
	// lease, a failed read or write of its row, a payload that could not
	// be decoded, a claim that found the attempts used up). Observers
	// leave such processings, like InboxDuplicate and InboxUnhandled ones,
	// out of their duration histograms.
	NotRun bool
}
