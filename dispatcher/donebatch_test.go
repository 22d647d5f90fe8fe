package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
)

// While one DONE write is in progress the next events pile up and are
// written together: far fewer statements than events, and every row DONE.
func TestDoneWritesAreCoalesced(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 4, DoneFlushWindow: -1})
	var (
		calls   atomic.Int32
		gate    = make(chan struct{})
		gateOne sync.Once
	)
	h.st.Fail = func(op, _ string) error {
		if op == "done" {
			if calls.Add(1) == 1 {
				<-gate // hold the first write while the others finish
			}
		}
		return nil
	}
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	const events = 200
	envs := make([]core.Envelope, 0, events)
	ids := make([]string, 0, events)
	for range events { // insert first: the held write below holds the store's lock
		e := h.insert("E")
		envs = append(envs, e)
		ids = append(ids, e.ID())
	}
	h.start()
	defer gateOne.Do(func() { close(gate) })
	for _, e := range envs {
		h.mustEnqueueHot(e)
	}
	h.wait("every listener to succeed", func() bool { return h.metrics.Success.Load() == events })
	gateOne.Do(func() { close(gate) })
	for _, id := range ids {
		h.waitStatus(id, core.StatusDone)
	}
	h.waitReleased(ids...)
	// memstore consults Fail once per id it writes; count statements instead.
	if got := h.st.DoneCalls(); got >= events/2 {
		t.Fatalf("%d DONE statements for %d events: writes were not coalesced", got, events)
	} else {
		t.Logf("%d events written DONE in %d statements", events, got)
	}
}

// Close flushes the DONE writes still pending.
func TestCloseFlushesPendingDoneWrites(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2, DoneFlushWindow: time.Hour, DoneBatchSize: 1000})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	h.start()
	const events = 20
	ids := make([]string, 0, events)
	for range events {
		e := h.insert("E")
		h.mustEnqueueHot(e)
		ids = append(ids, e.ID())
	}
	h.wait("every listener to succeed", func() bool { return h.metrics.Success.Load() == events })
	// The window (an hour) holds the batch open: nothing is DONE yet.
	if r := h.row(ids[0]); r.Status != core.StatusNew {
		t.Fatalf("row %v before the flush, want NEW", r.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if r := h.row(id); r.Status != core.StatusDone {
			t.Fatalf("row %s %v after Close, want DONE", id, r.Status)
		}
	}
}

// A failed batch releases every event of it for the poller.
func TestFailedDoneBatchReleasesAll(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	h.st.Fail = func(op, _ string) error {
		if op == "done" {
			return errors.New("connection reset")
		}
		return nil
	}
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	h.start()
	var ids []string
	for range 5 {
		e := h.insert("E")
		h.mustEnqueueHot(e)
		ids = append(ids, e.ID())
	}
	h.waitReleased(ids...)
	for _, id := range ids {
		if r := h.row(id); r.Status != core.StatusNew {
			t.Fatalf("row %s %v, want NEW for the poller", id, r.Status)
		}
	}
}

func TestDoneBatchSizeValidated(t *testing.T) {
	_, err := dispatcher.New(memstore.New(nil), registry.New(), dispatcher.Config{DoneBatchSize: -1})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("DoneBatchSize -1: err %v", err)
	}
}

// doneRecorder records the ids of each DONE statement.
type doneRecorder struct {
	*memstore.Store
	mu    sync.Mutex
	calls [][]string
}

func (s *doneRecorder) MarkDone(ctx context.Context, owner string, ids []string) (int64, error) {
	s.mu.Lock()
	s.calls = append(s.calls, append([]string(nil), ids...))
	s.mu.Unlock()
	return s.Store.MarkDone(ctx, owner, ids)
}

// A batch that mixes ordered events with others writes each kind in a
// statement of its own, so the others never wait on a lock an ordered
// event's successor holds (MySQL/MariaDB).
func TestDoneBatchWritesOrderedEventsApart(t *testing.T) {
	st := &doneRecorder{Store: memstore.New(nil)}
	reg := registry.New()
	reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	d := startOn(t, st, reg, dispatcher.Config{Workers: 4, DoneBatchSize: 4, DoneFlushWindow: time.Hour})
	ordered := map[string]bool{}
	for i, key := range []string{"k1", "", "k2", ""} {
		b := core.NewEvent("E").ID(fmt.Sprintf("e-%d", i)).PayloadJSONString(`{}`)
		if key != "" {
			b = b.OrderKey(key)
			ordered[fmt.Sprintf("e-%d", i)] = true
		}
		publishHot(t, d, st.Store, b)
	}
	testsupport.WaitFor(t, waitTimeout, "every event DONE", func() bool {
		for i := range 4 {
			if r, ok := st.Get(fmt.Sprintf("e-%d", i)); !ok || r.Status != core.StatusDone {
				return false
			}
		}
		return true
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.calls) != 2 {
		t.Fatalf("DONE statements %v, want 2: the ordered events and the others apart", st.calls)
	}
	for _, ids := range st.calls {
		for _, id := range ids[1:] {
			if ordered[id] != ordered[ids[0]] {
				t.Errorf("one DONE statement mixes ordered and other events: %v", ids)
			}
		}
	}
}

// lostAnswer commits its first DONE write and then reports an error, as
// when the connection dies before the server's answer arrives.
type lostAnswer struct {
	*memstore.Store
	calls atomic.Int32
}

func (s *lostAnswer) MarkDone(ctx context.Context, owner string, ids []string) (int64, error) {
	n, err := s.Store.MarkDone(ctx, owner, ids)
	if s.calls.Add(1) == 1 && err == nil {
		return 0, fmt.Errorf("connection reset after %d rows were marked", n)
	}
	return n, err
}

// A DONE write whose first try committed but failed to answer is retried;
// the retry finds the rows DONE and changes none. That is not a lease
// lost: no LeaseLost is counted (the alert on it says to expect
// duplicates), and every event is DONE and delivered once.
func TestRetriedDoneWriteAfterALostAnswerIsNoLeaseLost(t *testing.T) {
	st := &lostAnswer{Store: memstore.New(nil)}
	reg := registry.New()
	var delivered atomic.Int32
	reg.RegisterFunc("E", func(context.Context, core.Envelope) error { delivered.Add(1); return nil })
	metrics := &testsupport.Metrics{}
	logs := &testsupport.LogBuffer{}
	d := startOn(t, st, reg, dispatcher.Config{Workers: 1, DoneBatchSize: 3, DoneFlushWindow: time.Hour,
		Metrics: metrics, Logger: logs.Logger()})
	for i := range 3 {
		publishHot(t, d, st.Store, core.NewEvent("E").ID(fmt.Sprintf("lost-%d", i)).PayloadJSONString(`{}`))
	}
	testsupport.WaitFor(t, waitTimeout, "the retried DONE write", func() bool { return st.calls.Load() >= 2 })
	testsupport.WaitFor(t, waitTimeout, "its WARN", func() bool { return logs.Count("status write retried after an error") == 1 })
	for i := range 3 {
		if r, ok := st.Get(fmt.Sprintf("lost-%d", i)); !ok || r.Status != core.StatusDone {
			t.Errorf("lost-%d: %+v, want DONE", i, r)
		}
	}
	if n := metrics.LeasesLost.Load(); n != 0 {
		t.Errorf("LeaseLost counted %d, want 0", n)
	}
	if n := delivered.Load(); n != 3 {
		t.Errorf("%d deliveries, want 3", n)
	}
}

// startOn builds a dispatcher on st and starts it; it is closed when the
// test ends.
func startOn(t *testing.T, st core.StatusWriter, reg *registry.Registry, cfg dispatcher.Config) *dispatcher.Dispatcher {
	t.Helper()
	d, err := dispatcher.New(st, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = d.Close(ctx)
	})
	return d
}

// publishHot builds b's event, stores it on st leased to d, and hands it
// to d's hot queue, as a commit does.
func publishHot(t *testing.T, d *dispatcher.Dispatcher, st *memstore.Store, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	lease := d.HotLease(env)
	if err := st.Insert(context.Background(), nil, env, lease); err != nil {
		t.Fatal(err)
	}
	if !d.EnqueueHot(env, lease) {
		t.Fatalf("EnqueueHot(%s) = false", env.ID())
	}
	return env
}
