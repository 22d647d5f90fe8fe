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
	d, err := dispatcher.New(st, reg, dispatcher.Config{Workers: 4, DoneBatchSize: 4, DoneFlushWindow: time.Hour})
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
	ordered := map[string]bool{}
	for i, key := range []string{"k1", "", "k2", ""} {
		b := core.NewEvent("E").ID(fmt.Sprintf("e-%d", i)).PayloadJSONString(`{}`)
		if key != "" {
			b = b.OrderKey(key)
			ordered[fmt.Sprintf("e-%d", i)] = true
		}
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
