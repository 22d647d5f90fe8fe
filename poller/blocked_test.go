package poller_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// orderedStore is a store that counts blocked ordering keys.
type orderedStore struct {
	*memstore.Store
	mu     sync.Mutex
	n      int
	err    error
	counts atomic.Int64
}

func (s *orderedStore) CountBlockedKeys(context.Context) (int, error) {
	s.counts.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.err
}

func (s *orderedStore) set(n int, err error) {
	s.mu.Lock()
	s.n, s.err = n, err
	s.mu.Unlock()
}

func TestBlockedKeysAreReportedToOrderMetrics(t *testing.T) {
	e := newPollEnv(10)
	st := &orderedStore{Store: e.st}
	p, err := poller.NewWithQueue(st, e.q, poller.Config{Now: e.clock.Now, Logger: e.logs.Logger(), Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	st.set(3, nil)
	p.ReportBlockedKeys(context.Background())
	if n, calls := e.metrics.Blocked.Load(), e.metrics.BlockedCalls.Load(); n != 3 || calls != 1 {
		t.Fatalf("BlockedKeys: last %d in %d calls, want 3 in 1", n, calls)
	}
	// A failing count reports nothing and is logged once per incident.
	st.set(0, errors.New("no column order_key"))
	p.ReportBlockedKeys(context.Background())
	p.ReportBlockedKeys(context.Background())
	if calls := e.metrics.BlockedCalls.Load(); calls != 1 {
		t.Errorf("a failing count was reported (%d calls)", calls)
	}
	if n := e.logs.Count("level=WARN", "counting blocked ordering keys failed"); n != 1 {
		t.Errorf("%d WARN lines for one incident, want 1:\n%s", n, e.logs)
	}
	st.set(0, nil)
	p.ReportBlockedKeys(context.Background())
	if n, calls := e.metrics.Blocked.Load(), e.metrics.BlockedCalls.Load(); n != 0 || calls != 2 {
		t.Errorf("after recovery: last %d in %d calls, want 0 in 2", n, calls)
	}
	// The incident ends with a line of its own (it never did), once; the
	// next failure is a new incident.
	p.ReportBlockedKeys(context.Background())
	if n := e.logs.Count("level=INFO", "counting blocked ordering keys recovered"); n != 1 {
		t.Errorf("%d recovered lines, want 1:\n%s", n, e.logs)
	}
	st.set(0, errors.New("connection refused"))
	p.ReportBlockedKeys(context.Background())
	if n := e.logs.Count("level=WARN", "counting blocked ordering keys failed"); n != 2 {
		t.Errorf("%d WARN lines after a second incident began, want 2:\n%s", n, e.logs)
	}
}

func TestBlockedKeysNotCountedForNopMetricsOrUnorderedStores(t *testing.T) {
	e := newPollEnv(10)
	st := &orderedStore{Store: e.st}
	p, err := poller.NewWithQueue(st, e.q, poller.Config{Now: e.clock.Now, Logger: e.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	p.ReportBlockedKeys(context.Background())
	if n := st.counts.Load(); n != 0 {
		t.Errorf("counted %d times for core.NopMetrics, want never", n)
	}
	// A store without CountBlockedKeys is skipped.
	p2 := e.poller(t, poller.Config{})
	p2.ReportBlockedKeys(context.Background())
	if calls := e.metrics.BlockedCalls.Load(); calls != 0 {
		t.Errorf("BlockedKeys reported %d times for a store that cannot count", calls)
	}
}

// Each store reports to its own Metrics (core.StoreMetrics).
func TestBlockedKeysPerStore(t *testing.T) {
	m := &testsupport.StoreMetrics{}
	p, err := poller.NewMulti(poller.Config{Metrics: m, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	clock := testsupport.NewClock(testsupport.Epoch)
	a := &orderedStore{Store: memstore.New(clock.Now)}
	b := &orderedStore{Store: memstore.New(clock.Now)}
	a.set(1, nil)
	b.set(5, nil)
	if err := p.AddQueue("a", a, newFakeQueue(10)); err != nil {
		t.Fatal(err)
	}
	if err := p.AddQueue("b", b, newFakeQueue(10)); err != nil {
		t.Fatal(err)
	}
	p.ReportBlockedKeys(context.Background())
	if got, want := [2]int64{m.For("a").Blocked.Load(), m.For("b").Blocked.Load()}, [2]int64{1, 5}; got != want {
		t.Errorf("per store %v, want %v", got, want)
	}
	if m.BlockedCalls.Load() != 0 {
		t.Errorf("the shared Metrics got a per-store signal")
	}
}

// The running poller counts at its reap pace.
func TestBlockedKeysCountedAtTheReapInterval(t *testing.T) {
	e := newPollEnv(10)
	st := &orderedStore{Store: e.st}
	st.set(2, nil)
	p, err := poller.NewWithQueue(st, e.q, poller.Config{
		Interval: 5 * time.Millisecond, ReapInterval: time.Millisecond, Logger: e.logs.Logger(), Metrics: e.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, waitTimeout)) })
	testsupport.WaitFor(t, waitTimeout, "a BlockedKeys signal", func() bool { return e.metrics.BlockedCalls.Load() > 0 })
	if n := e.metrics.Blocked.Load(); n != 2 {
		t.Errorf("BlockedKeys(%d), want 2", n)
	}
}
