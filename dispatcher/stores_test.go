package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
)

func newMulti(t *testing.T, cfg dispatcher.Config, reg *registry.Registry) *dispatcher.Dispatcher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := dispatcher.NewMulti(reg, cfg)
	if err != nil {
		t.Fatalf("NewMulti: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func TestStoresShareWorkersAndWriteBackToTheirStore(t *testing.T) {
	reg := registry.New()
	var mu sync.Mutex
	seen := map[string][]string{} // event id → tenants seen by the listener
	reg.RegisterFunc("Paid", func(_ context.Context, env core.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		seen[env.ID()] = append(seen[env.ID()], env.TenantID())
		return nil
	})
	logs := &testsupport.LogBuffer{}
	metrics := &testsupport.StoreMetrics{}
	d := newMulti(t, dispatcher.Config{Workers: 2, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, reg)
	stores := map[string]*memstore.Store{"acme": memstore.New(nil), "globex": memstore.New(nil)}
	queues := map[string]*dispatcher.StoreQueue{}
	for id, st := range stores {
		st.Changed = make(chan struct{}, 1)
		q, err := d.AddStoreQueue(id, st)
		if err != nil {
			t.Fatalf("AddStore(%s): %v", id, err)
		}
		queues[id] = q
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The same event id in both stores: ids are unique per store only, so
	// both are delivered, and each DONE goes to its own store.
	for id, q := range queues {
		env, err := core.NewEvent("Paid").ID("evt-1").TenantID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		client, err := publish.New(stores[id], q)
		if err != nil {
			t.Fatal(err)
		}
		publishCommitted(t, client, env)
	}
	for id, st := range stores {
		testsupport.WaitFor(t, waitTimeout, "DONE in "+id, func() bool {
			r, ok := st.Get("evt-1")
			return ok && r.Status == core.StatusDone
		}, st.Changed)
	}
	testsupport.WaitFor(t, waitTimeout, "both deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen["evt-1"]) == 2
	}, nil)
	testsupport.WaitFor(t, waitTimeout, "per-store success metrics", func() bool {
		return metrics.For("acme").Success.Load() == 1 && metrics.For("globex").Success.Load() == 1
	}, nil)
	if got := d.Stores(); len(got) != 2 || got[0] != "acme" || got[1] != "globex" {
		t.Errorf("Stores() = %v", got)
	}
	// The dispatcher's own intake has no store to write to.
	env, _ := core.NewEvent("Paid").ID("evt-2").PayloadJSONString(`{}`).Build()
	if d.EnqueueHot(env, d.HotLease(env)) || d.EnqueueCold(env, 0, time.Now().Add(time.Minute)) || d.InFlight("evt-2") {
		t.Error("a NewMulti dispatcher must refuse events on its own intake")
	}
}

func TestStoreLogsCarryTheStoreID(t *testing.T) {
	reg := registry.New()
	reg.RegisterFunc("Boom", func(context.Context, core.Envelope) error { return errors.New("boom") })
	logs := &testsupport.LogBuffer{}
	d := newMulti(t, dispatcher.Config{Workers: 1, MaxAttempts: 1,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}, reg)
	st := memstore.New(nil)
	st.Changed = make(chan struct{}, 1)
	q, err := d.AddStoreQueue("tenant-7", st)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	env, _ := core.NewEvent("Boom").PayloadJSONString(`{}`).Build()
	lease := q.HotLease(env)
	if err := st.Insert(context.Background(), nil, env, lease); err != nil {
		t.Fatal(err)
	}
	if !q.EnqueueHot(env, lease) {
		t.Fatal("EnqueueHot = false")
	}
	testsupport.WaitFor(t, waitTimeout, "DEAD", func() bool { r, _ := st.Get(env.ID()); return r.Status == core.StatusDead }, st.Changed)
	testsupport.WaitFor(t, waitTimeout, "the DEAD log line (once the row is DEAD)", func() bool { return len(logs.Lines("event is DEAD")) > 0 })
	lines := logs.Lines("event is DEAD")
	if len(lines) != 1 || !strings.Contains(lines[0], "store=tenant-7") {
		t.Fatalf("DEAD log line without the store id: %q", logs.String())
	}
}

func TestRemoveStoreWaitsForItsEventsInFlight(t *testing.T) {
	reg := registry.New()
	g := newGate(t)
	started := make(chan string, 4)
	reg.RegisterFunc("Slow", func(_ context.Context, env core.Envelope) error {
		started <- env.ID()
		<-g.ch
		return nil
	})
	d := newMulti(t, dispatcher.Config{Workers: 2}, reg)
	st := memstore.New(nil)
	st.Changed = make(chan struct{}, 1)
	q, err := d.AddStoreQueue("a", st)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	env, _ := core.NewEvent("Slow").PayloadJSONString(`{}`).Build()
	lease := q.HotLease(env)
	if err := st.Insert(context.Background(), nil, env, lease); err != nil {
		t.Fatal(err)
	}
	if !q.EnqueueHot(env, lease) {
		t.Fatal("EnqueueHot = false")
	}
	recv(t, started, "the listener to start")
	if q.Held() != 1 {
		t.Fatalf("Held = %d, want 1", q.Held())
	}

	// Bounded by ctx: the listener still runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.RemoveStore(ctx, "a"); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 events still in flight") {
		t.Fatalf("RemoveStore with a cancelled ctx = %v, want context.Canceled and the count", err)
	}
	// Removed: no more intake, not listed.
	env2, _ := core.NewEvent("Slow").PayloadJSONString(`{}`).Build()
	if q.EnqueueHot(env2, q.HotLease(env2)) || q.EnqueueCold(env2, 0, time.Now().Add(time.Minute), time.Time{}, q.ClaimMark(), 0, false) {
		t.Error("a removed store's queue must refuse events")
	}
	if len(d.Stores()) != 0 {
		t.Errorf("Stores() = %v after RemoveStore", d.Stores())
	}

	done := make(chan error, 1)
	go func() { done <- d.RemoveStore(context.Background(), "a") }()
	select {
	case err := <-done:
		t.Fatalf("RemoveStore returned %v while the event was still running", err)
	case <-time.After(20 * time.Millisecond): // a negative check: it must still wait
	}
	g.open()
	if err := recv(t, done, "RemoveStore to return"); err != nil {
		t.Fatalf("RemoveStore: %v", err)
	}
	if r, _ := st.Get(env.ID()); r.Status != core.StatusDone {
		t.Fatalf("the removed store's event in flight ended %v, want DONE written before RemoveStore returned", r.Status)
	}
	if err := d.RemoveStore(context.Background(), "nope"); err != nil {
		t.Errorf("RemoveStore(unknown) = %v, want nil", err)
	}
	// The id may be added again.
	if _, err := d.AddStoreQueue("a", st); err != nil {
		t.Errorf("AddStore after RemoveStore: %v", err)
	}
}

func TestRemoveStoreCancelsItsRetryTimers(t *testing.T) {
	reg := registry.New()
	reg.RegisterFunc("Fail", func(context.Context, core.Envelope) error { return errors.New("no") })
	d := newMulti(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)}, reg)
	st := memstore.New(nil)
	st.Changed = make(chan struct{}, 1)
	q, _ := d.AddStoreQueue("a", st)
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	env, _ := core.NewEvent("Fail").PayloadJSONString(`{}`).Build()
	lease := q.HotLease(env)
	_ = st.Insert(context.Background(), nil, env, lease)
	q.EnqueueHot(env, lease)
	testsupport.WaitFor(t, waitTimeout, "RETRY", func() bool { r, _ := st.Get(env.ID()); return r.Status == core.StatusRetry }, st.Changed)
	testsupport.WaitFor(t, waitTimeout, "the retry timer", func() bool { return d.PendingRetries() == 1 }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.RemoveStore(ctx, "a"); err != nil {
		t.Fatalf("RemoveStore: %v (a retry timer must not hold the removal for an hour)", err)
	}
	if d.PendingRetries() != 0 || q.Held() != 0 {
		t.Fatalf("after RemoveStore: %d timers, %d held; want 0, 0", d.PendingRetries(), q.Held())
	}
}

func TestAddStoreRejectsBadInput(t *testing.T) {
	d := newMulti(t, dispatcher.Config{}, registry.New())
	st := memstore.New(nil)
	if dispatcher.MaxStoreIDLen != 128 {
		t.Errorf("MaxStoreIDLen = %d; its doc comment says 128 bytes", dispatcher.MaxStoreIDLen)
	}
	for _, id := range []string{"", strings.Repeat("x", dispatcher.MaxStoreIDLen+1), "a\nb", "bad\xff"} {
		if _, err := d.AddStoreQueue(id, st); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("AddStore(%q) = %v, want ErrInvalidConfig", id, err)
		}
	}
	if _, err := d.AddStoreQueue("x", nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("AddStore(nil store) = %v", err)
	}
	if _, err := d.AddStoreQueue("x", st); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddStoreQueue("x", st); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "already") {
		t.Errorf("AddStore twice = %v", err)
	}
	_ = d.Close(context.Background())
	if _, err := d.AddStoreQueue("y", st); !errors.Is(err, core.ErrClosed) {
		t.Errorf("AddStore after Close = %v, want ErrClosed", err)
	}
	if _, err := dispatcher.NewMulti(nil, dispatcher.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("NewMulti(nil listeners) = %v", err)
	}
}

func TestRemoveStorePastItsDeadlineInterruptsItsListeners(t *testing.T) {
	reg := registry.New()
	started := make(chan struct{}, 1)
	reg.RegisterFunc("Wait", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	d := newMulti(t, dispatcher.Config{Workers: 1}, reg)
	st := memstore.New(nil)
	q, _ := d.AddStoreQueue("a", st)
	other, _ := d.AddStoreQueue("b", memstore.New(nil))
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	env, _ := core.NewEvent("Wait").PayloadJSONString(`{}`).Build()
	lease := q.HotLease(env)
	_ = st.Insert(context.Background(), nil, env, lease)
	q.EnqueueHot(env, lease)
	recv(t, started, "the listener to start")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.RemoveStore(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("RemoveStore = %v", err)
	}
	// The listener saw its ctx end; nothing is charged, the row is as it was.
	if err := d.RemoveStore(context.Background(), "a"); err != nil {
		t.Fatalf("second RemoveStore: %v", err)
	}
	if r, _ := st.Get(env.ID()); r.Status != core.StatusNew || r.Attempts != 0 {
		t.Fatalf("row after an interrupted delivery: %v, %d attempts; want NEW, 0", r.Status, r.Attempts)
	}
	if other.Held() != 0 || len(d.Stores()) != 1 {
		t.Fatalf("the other store is affected: held %d, stores %v", other.Held(), d.Stores())
	}
}

// Each store's recurring lines are rate-limited apart: failed DONE writes
// in two stores log one ERROR naming each, where one rate limiter shared
// by the stores logged the first store's and hid the other's.
func TestStoresRateLimitTheirLinesApart(t *testing.T) {
	reg := registry.New()
	reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	logs := &testsupport.LogBuffer{}
	d := newMulti(t, dispatcher.Config{Workers: 2, Logger: slog.New(slog.NewTextHandler(logs, nil))}, reg)
	var failed atomic.Int32
	queues := map[string]*dispatcher.StoreQueue{}
	stores := map[string]*memstore.Store{}
	for _, id := range []string{"my", "pg"} {
		st := memstore.New(nil)
		st.Fail = func(op, _ string) error {
			if op == "done" {
				failed.Add(1)
				return errors.New("database is down")
			}
			return nil
		}
		q, err := d.AddStoreQueue(id, st)
		if err != nil {
			t.Fatal(err)
		}
		queues[id], stores[id] = q, st
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id, q := range queues {
		env, _ := core.NewEvent("E").PayloadJSONString(`{}`).Build()
		lease := q.HotLease(env)
		if err := stores[id].Insert(context.Background(), nil, env, lease); err != nil {
			t.Fatal(err)
		}
		if !q.EnqueueHot(env, lease) {
			t.Fatal("EnqueueHot = false")
		}
	}
	testsupport.WaitFor(t, waitTimeout, "a failed DONE write in each store", func() bool {
		return logs.Count("level=ERROR", "status write failed", "store=my") > 0 && logs.Count("level=ERROR", "status write failed", "store=pg") > 0
	}, nil)
}

// hangingDone is a store whose DONE writes wait until release is closed
// (a database answering slowly, or not at all), telling entered when the
// first one starts.
type hangingDone struct {
	*memstore.Store
	entered chan struct{}
	once    sync.Once
	release chan struct{}
}

func (s *hangingDone) MarkDone(ctx context.Context, owner string, ids []string) (int64, error) {
	s.once.Do(func() { close(s.entered) })
	select {
	case <-s.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Store.MarkDone(ctx, owner, ids)
}

// A store whose DONE writes hang holds up only its own: the other stores'
// events are written DONE meanwhile, however many. One writer wrote every
// store's batch in turn: a tenant database answering a second late
// stopped the other tenants' deliveries for seconds at a time (the
// workers blocked on the batcher, the hot queue filled).
func TestSlowStoreHoldsUpOnlyItsOwnDoneWrites(t *testing.T) {
	reg := registry.New()
	reg.RegisterFunc("Paid", func(context.Context, core.Envelope) error { return nil })
	const done = 4 // DoneBatchSize: the other store's events fill many batches
	d := newMulti(t, dispatcher.Config{Workers: 2, DoneBatchSize: done, DoneFlushWindow: time.Millisecond, StatusTimeout: time.Minute}, reg)
	slow := &hangingDone{Store: memstore.New(nil), entered: make(chan struct{}), release: make(chan struct{})}
	defer close(slow.release)
	fast := memstore.New(nil)
	fast.Changed = make(chan struct{}, 1)
	publishTo := func(id string, st core.Store, n int) []string {
		q, err := d.AddStoreQueue(id, st)
		if err != nil {
			t.Fatalf("AddStore(%s): %v", id, err)
		}
		client, err := publish.New(st, q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range n {
			env, err := core.NewEvent("Paid").ID(fmt.Sprintf("%s-%d", id, i)).PayloadJSONString(`{}`).Build()
			if err != nil {
				t.Fatal(err)
			}
			publishCommitted(t, client, env)
			ids = append(ids, env.ID())
		}
		return ids
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	publishTo("slow", slow, 1)
	select {
	case <-slow.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the slow store's DONE write never started")
	}
	ids := publishTo("fast", fast, 20*done)
	testsupport.WaitFor(t, waitTimeout, "every event of the other store DONE while the slow store's write hangs", func() bool {
		for _, id := range ids {
			if r, ok := fast.Get(id); !ok || r.Status != core.StatusDone {
				return false
			}
		}
		return true
	}, fast.Changed)
}

// publishCommitted publishes env through client in a transaction and
// commits it.
func publishCommitted(t *testing.T, client *publish.Client, env core.Envelope) {
	t.Helper()
	tx := testsupport.NewTx()
	if _, err := client.Publish(core.ContextWithTx(context.Background(), tx), env); err != nil {
		t.Fatalf("Publish(%s): %v", env.ID(), err)
	}
	tx.Commit()
}
