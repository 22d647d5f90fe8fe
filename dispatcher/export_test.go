package dispatcher

import (
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/handoff"
)

// Closing reports whether Close has been called on d (test hook: lets a
// test wait until Close has stopped intake before it releases a listener).
func Closing(d *Dispatcher) bool { return d.closed.Load() }

// LiveWorkers returns how many worker goroutines are running (test hook:
// lets a test check that the pool keeps its size).
func LiveWorkers(d *Dispatcher) int { return int(d.workers.Load()) }

// HungCalls returns how many listener calls the watchdog gave up on have
// not returned yet (test hook: their events stay held until they do).
func HungCalls(d *Dispatcher) int { return d.hungCalls() }

// The hand-off between the parts is internal (package handoff); the
// tests of this package drive it directly through these.

// StoreQueue is the intake of one store.
type StoreQueue = storeQueue

// AddStoreQueue is AddStore returning the store's intake.
func (d *Dispatcher) AddStoreQueue(id string, store core.StatusWriter) (*StoreQueue, error) {
	if err := d.AddStore(id, store); err != nil {
		return nil, err
	}
	q := handoff.Of(d, id).(storeQueue)
	return &q, nil
}

func (d *Dispatcher) def0() storeQueue { return storeQueue{d: d, o: d.def} }

func (d *Dispatcher) HotLease(env core.Envelope) core.Lease { return d.hotLease(env) }
func (d *Dispatcher) EnqueueHot(env core.Envelope, lease core.Lease) bool {
	return d.enqueueHot(d.def, env, lease)
}
func (d *Dispatcher) ClaimLease(now time.Time) core.Lease { return d.claimLease(now) }
func (d *Dispatcher) EnqueueCold(env core.Envelope, attempts int, leaseUntil time.Time) bool {
	return d.enqueueCold(d.def, env, attempts, leaseUntil, time.Time{}, d.tracker.Mark(), 0, attempts > 0)
}
func (d *Dispatcher) ColdRoom() int { return d.coldRoom() }
func (d *Dispatcher) InFlight(eventID string) bool {
	return d.def != nil && d.def0().InFlight(eventID)
}
func (d *Dispatcher) Held() int {
	if d.def == nil {
		return 0
	}
	return d.def0().Held()
}
func (d *Dispatcher) QueueDepths() (hot, cold int) { return d.queueDepths() }
func (d *Dispatcher) PendingRetries() int          { return d.pendingRetries() }
func (d *Dispatcher) OnTimers() int                { return d.def0().OnTimers() }
func (d *Dispatcher) HeldBytes() int64             { return d.heldBytes.Load() }
func (d *Dispatcher) HotWaiting() bool             { return d.hotWaitingNow() }

// ClaimMark and EnqueueColdMarked are the poller's view of the default
// store's cold intake: the mark taken before a claim, and the enqueue of a
// row that claim read.
func (d *Dispatcher) ClaimMark() uint64 { return d.tracker.Mark() }
func (d *Dispatcher) EnqueueColdMarked(env core.Envelope, attempts int, leaseUntil time.Time, mark uint64) bool {
	return d.enqueueCold(d.def, env, attempts, leaseUntil, time.Time{}, mark, 0, attempts > 0)
}

// NotifyRoom is the poller's room notice on the default store's intake.
func (d *Dispatcher) NotifyRoom(fn func()) { d.def0().NotifyRoom(fn) }

// EnqueueColdAt is EnqueueCold of a row at position seq of its ordering
// key.
func (d *Dispatcher) EnqueueColdAt(env core.Envelope, leaseUntil time.Time, seq int64) bool {
	return d.enqueueCold(d.def, env, 0, leaseUntil, time.Time{}, d.tracker.Mark(), seq, false)
}

// IntakeClosing reports whether Close is waiting to stop intake for a
// hand-off that looked at closed and has not sent yet (test hook).
func IntakeClosing(d *Dispatcher) bool {
	if d.intakeMu.TryRLock() {
		d.intakeMu.RUnlock()
		return false
	}
	return true
}

// SetWatchLate has the watchdog of every later listener call act on
// f(how late it fired) (test hook: a process stopped past the watchdog).
func SetWatchLate(d *Dispatcher, f func(late time.Duration) time.Duration) { d.watchLate = f }
