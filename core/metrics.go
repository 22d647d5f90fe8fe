package core

import (
	"time"
)

// Metrics receives the framework's signals. Calls happen on hot paths and
// must not block; most run on the library's own goroutines, where a panic
// is not recovered and ends the process, as a panic in any goroutine does.
// Embed [NopMetrics] in an implementation so that signals added in later
// versions keep it compiling.
type Metrics interface {
	HotEnqueued()                // an event entered the hot queue
	HotDropped()                 // the hot queue was full; the poller will deliver it
	ColdEnqueued()               // the poller queued an event
	DispatchSuccess()            // all listeners succeeded (also an event with none, marked DONE by dispatcher.UnhandledDone: UnhandledMetrics counts those apart)
	DispatchFailure()            // a delivery failed and will be retried
	DispatchDead()               // a delivery failed for the last time
	QueueDepths(hot, cold int)   // current queue lengths
	OldestLag(lag time.Duration) // age of the oldest pending event seen by the poller, every poll (one skipped for a full cold queue: while the dispatcher holds the last claim's oldest row; a claim that left this node's held rows out and found none due: the store's first due time, where it can tell)
	LeaseLost(n int)             // n status writes were fenced off: another node owns those events now (or, with the dispatcher's InFlightTTL, a newer run of this node); a DONE write retried after an error, whose failed try most likely committed, is not counted
	LeasesReaped(n int)          // n expired leases were released
}

// OpsMetrics receives the signals of operations (replay, retention
// purge). A Metrics that also implements it gets them; NopMetrics does.
type OpsMetrics interface {
	Replayed(n int)        // n DEAD events were moved back to NEW
	Purged(done, dead int) // rows removed by a retention purge
}

// UnhandledMetrics receives a signal each time the dispatcher finds no
// listener for an event (its type has no listener and there is no
// RegisterAll listener), whatever dispatcher.Config.Unhandled then does
// with it; an event left pending (UnhandledLeave) signals again each time
// it is looked at. A Metrics that also implements it gets the signal;
// NopMetrics does.
type UnhandledMetrics interface {
	Unhandled(eventType string) // an event of eventType found no listener
}

// OrderMetrics receives the number of ordering keys held by a DEAD event
// under the block policy (their later events wait until it is replayed
// or discarded). The poller counts them in each store that delivers in
// order, once every poller.Config.ReapInterval, with one read-only
// statement, and reports to the store's Metrics (see StoreMetrics). A
// Metrics that also implements it gets the signal; NopMetrics does (the
// poller does not count for a plain NopMetrics).
type OrderMetrics interface {
	BlockedKeys(n int) // n keys are blocked by a DEAD event
}

// PostponeMetrics receives a signal each time the dispatcher puts an
// event off because its listener returned an [Unavailable] error (the
// listener's broker or service could not be reached): no attempt is
// charged. A Metrics that also implements it gets the signal; NopMetrics
// does.
type PostponeMetrics interface {
	Postponed() // an event was put off, its downstream unavailable
}

// NopMetrics discards every signal. It is the default.
type NopMetrics struct{}

// HotEnqueued does nothing.
func (NopMetrics) HotEnqueued() {}

// HotDropped does nothing.
func (NopMetrics) HotDropped() {}

// ColdEnqueued does nothing.
func (NopMetrics) ColdEnqueued() {}

// DispatchSuccess does nothing.
func (NopMetrics) DispatchSuccess() {}

// DispatchFailure does nothing.
func (NopMetrics) DispatchFailure() {}

// DispatchDead does nothing.
func (NopMetrics) DispatchDead() {}

// QueueDepths does nothing.
func (NopMetrics) QueueDepths(hot, cold int) {}

// OldestLag does nothing.
func (NopMetrics) OldestLag(time.Duration) {}

// LeaseLost does nothing.
func (NopMetrics) LeaseLost(int) {}

// LeasesReaped does nothing.
func (NopMetrics) LeasesReaped(int) {}

// Replayed does nothing.
func (NopMetrics) Replayed(int) {}

// Purged does nothing.
func (NopMetrics) Purged(int, int) {}

// Unhandled does nothing.
func (NopMetrics) Unhandled(string) {}

// BlockedKeys does nothing.
func (NopMetrics) BlockedKeys(int) {}

// Postponed does nothing.
func (NopMetrics) Postponed() {}

var (
	_ Metrics          = NopMetrics{}
	_ OpsMetrics       = NopMetrics{}
	_ UnhandledMetrics = NopMetrics{}
	_ OrderMetrics     = NopMetrics{}
	_ PostponeMetrics  = NopMetrics{}
)

// StoreMetrics is implemented by a Metrics that labels signals with the
// store (database, tenant) they concern. With several stores (package
// tenant) every per-store part (the dispatcher's writes and outcomes of
// that store's events, its poller) reports to ForStore(id); signals about
// shared parts (queue depths) go to the Metrics itself.
type StoreMetrics interface {
	ForStore(storeID string) Metrics
}
