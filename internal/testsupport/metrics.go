package testsupport

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
)

// Metrics counts every signal of core.Metrics, core.OpsMetrics,
// core.UnhandledMetrics and core.OrderMetrics; it is safe for concurrent use and its zero value
// is ready. Read the counters with Load.
type Metrics struct {
	core.NopMetrics

	Hot, Dropped, Cold     atomic.Int64 // HotEnqueued, HotDropped, ColdEnqueued calls
	Success, Failure, Dead atomic.Int64 // DispatchSuccess, DispatchFailure, DispatchDead calls
	DepthCalls, LagCalls   atomic.Int64 // QueueDepths, OldestLag calls
	LastLag                atomic.Int64 // the last lag reported, in nanoseconds
	LeasesLost             atomic.Int64 // sum of LeaseLost(n)
	Reaped, ReapCalls      atomic.Int64 // sum of LeasesReaped(n), and its calls
	Replays                atomic.Int64 // sum of Replayed(n)
	PurgedDone, PurgedDead atomic.Int64 // sums of Purged(done, dead)
	Blocked, BlockedCalls  atomic.Int64 // the last BlockedKeys(n), and its calls
	PostponedN             atomic.Int64 // Postponed calls
	mu                     sync.Mutex
	unhandled              map[string]int
}

var (
	_ core.Metrics          = (*Metrics)(nil)
	_ core.OpsMetrics       = (*Metrics)(nil)
	_ core.UnhandledMetrics = (*Metrics)(nil)
	_ core.OrderMetrics     = (*Metrics)(nil)
	_ core.PostponeMetrics  = (*Metrics)(nil)
)

func (m *Metrics) HotEnqueued()         { m.Hot.Add(1) }
func (m *Metrics) HotDropped()          { m.Dropped.Add(1) }
func (m *Metrics) ColdEnqueued()        { m.Cold.Add(1) }
func (m *Metrics) DispatchSuccess()     { m.Success.Add(1) }
func (m *Metrics) DispatchFailure()     { m.Failure.Add(1) }
func (m *Metrics) DispatchDead()        { m.Dead.Add(1) }
func (m *Metrics) QueueDepths(_, _ int) { m.DepthCalls.Add(1) }
func (m *Metrics) LeaseLost(n int)      { m.LeasesLost.Add(int64(n)) }
func (m *Metrics) Replayed(n int)       { m.Replays.Add(int64(n)) }
func (m *Metrics) Postponed()           { m.PostponedN.Add(1) }

// OldestLag counts the call and keeps lag in LastLag.
func (m *Metrics) OldestLag(lag time.Duration) {
	m.LagCalls.Add(1)
	m.LastLag.Store(int64(lag))
}

// LeasesReaped counts the call and adds n to Reaped.
func (m *Metrics) LeasesReaped(n int) {
	m.ReapCalls.Add(1)
	m.Reaped.Add(int64(n))
}

// BlockedKeys counts the call and keeps n in Blocked.
func (m *Metrics) BlockedKeys(n int) {
	m.Blocked.Store(int64(n))
	m.BlockedCalls.Add(1)
}

// Purged adds to PurgedDone and PurgedDead.
func (m *Metrics) Purged(done, dead int) {
	m.PurgedDone.Add(int64(done))
	m.PurgedDead.Add(int64(dead))
}

// Unhandled counts one signal for eventType.
func (m *Metrics) Unhandled(eventType string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unhandled == nil {
		m.unhandled = map[string]int{}
	}
	m.unhandled[eventType]++
}

// UnhandledCount returns how many Unhandled signals eventType got.
func (m *Metrics) UnhandledCount(eventType string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unhandled[eventType]
}

// String summarizes the dispatch counters for a failure message.
func (m *Metrics) String() string {
	return fmt.Sprintf("hotEnqueued=%d hotDropped=%d coldEnqueued=%d success=%d failure=%d dead=%d leaseLost=%d",
		m.Hot.Load(), m.Dropped.Load(), m.Cold.Load(), m.Success.Load(), m.Failure.Load(), m.Dead.Load(),
		m.LeasesLost.Load())
}

// StoreMetrics implements core.StoreMetrics: the signals of each store go
// to a Metrics of their own (see For), the others to the embedded one. Its
// zero value is ready.
type StoreMetrics struct {
	Metrics
	storesMu sync.Mutex
	stores   map[string]*Metrics
}

var _ core.StoreMetrics = (*StoreMetrics)(nil)

// ForStore implements core.StoreMetrics.
func (m *StoreMetrics) ForStore(id string) core.Metrics { return m.For(id) }

// For returns the counters of store id.
func (m *StoreMetrics) For(id string) *Metrics {
	m.storesMu.Lock()
	defer m.storesMu.Unlock()
	if m.stores == nil {
		m.stores = map[string]*Metrics{}
	}
	s, ok := m.stores[id]
	if !ok {
		s = &Metrics{}
		m.stores[id] = s
	}
	return s
}
