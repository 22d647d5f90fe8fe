package dispatcher_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
)

// waitersStore is a memstore that says events wait behind every key
// (core.KeyWaiters), counting how often it was asked.
type waitersStore struct {
	*memstore.Store
	asked atomic.Int64
}

func (s *waitersStore) Waiting(context.Context, []string) (bool, error) {
	s.asked.Add(1)
	return true, nil
}

// positionStore is a waitersStore that also claims by position
// (core.SuccessorClaimer): an event waits after each finished one, whose
// position it gives as key "after-<id>", position 3.
type positionStore struct {
	waitersStore
	mu       sync.Mutex
	askedIDs [][]string
}

func (*positionStore) ClaimNext(context.Context, core.NextRequest) (core.NextResult, error) {
	return core.NextResult{}, nil
}

func (s *positionStore) WaitingAfter(_ context.Context, _ time.Time, ids []string) ([]core.OrderPos, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.askedIDs = append(s.askedIDs, ids)
	var out []core.OrderPos
	for _, id := range ids {
		out = append(out, core.OrderPos{Key: "after-" + id, Seq: 3})
	}
	return out, nil
}

// freedHarness runs a dispatcher of store st with a listener of "E" that
// succeeds, and records what it hands to the poller.
type freedHarness struct {
	t  *testing.T
	st interface {
		Get(string) (core.Record, bool)
	}
	ins   func(env core.Envelope, lease core.Lease) error
	d     *dispatcher.Dispatcher
	freed chan []core.OrderPos
}

func newFreedHarness(t *testing.T, store core.StatusWriter, mem *memstore.Store) *freedHarness {
	t.Helper()
	return newFreedHarnessWith(t, store, mem, dispatcher.Config{})
}

// newFreedHarnessWith is newFreedHarness with the dispatcher configured
// by cfg.
func newFreedHarnessWith(t *testing.T, store core.StatusWriter, mem *memstore.Store, cfg dispatcher.Config) *freedHarness {
	t.Helper()
	reg := registry.New()
	reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	d, err := dispatcher.New(store, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &freedHarness{t: t, st: mem, d: d, freed: make(chan []core.OrderPos, 8),
		ins: func(env core.Envelope, lease core.Lease) error {
			return mem.Insert(context.Background(), nil, env, lease)
		}}
	handoff.OnKeyFreed(d, "", func(after []core.OrderPos) { h.freed <- after })
	if err := d.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = d.Close(ctx)
	})
	return h
}

func (h *freedHarness) build(id, key string) core.Envelope {
	h.t.Helper()
	b := core.NewEvent("E").ID(id).PayloadJSONString(`{}`)
	if key != "" {
		b = b.OrderKey(key)
	}
	env, err := b.Build()
	if err != nil {
		h.t.Fatal(err)
	}
	return env
}

// hot delivers env through the hot path and waits until it is DONE: the
// batcher writes and hands on one batch after the other, so whatever an
// earlier batch handed on comes before what a later one does.
func (h *freedHarness) hot(env core.Envelope) {
	h.t.Helper()
	l := h.d.HotLease(env)
	if err := h.ins(env, l); err != nil {
		h.t.Fatal(err)
	}
	if !h.d.EnqueueHot(env, l) {
		h.t.Fatalf("EnqueueHot(%s) = false", env.ID())
	}
	h.waitDone(env.ID())
}

// cold delivers env as a claim at position seq of its key would: leased
// to this node, through the cold queue.
func (h *freedHarness) cold(env core.Envelope, seq int64) {
	h.t.Helper()
	lease := h.d.ClaimLease(time.Now())
	if err := h.ins(env, lease); err != nil {
		h.t.Fatal(err)
	}
	if !h.d.EnqueueColdAt(env, lease.Until, seq) {
		h.t.Fatalf("EnqueueColdAt(%s) = false", env.ID())
	}
}

func (h *freedHarness) waitDone(id string) {
	h.t.Helper()
	testsupport.WaitFor(h.t, waitTimeout, id+" DONE", func() bool {
		r, ok := h.st.Get(id)
		return ok && r.Status == core.StatusDone
	})
}

func (h *freedHarness) next(what string) []core.OrderPos {
	h.t.Helper()
	select {
	case after := <-h.freed:
		return after
	case <-time.After(waitTimeout):
		h.t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func (h *freedHarness) nothingMore() {
	h.t.Helper()
	select {
	case after := <-h.freed:
		h.t.Errorf("handed on %v more", after)
	default:
	}
}

// Once an ordered event is DONE, a dispatcher whose store claims by
// position hands the poller its position when a claim read it; for an
// event of the hot path it asks the store whether an event waits after
// it (WaitingAfter) and hands on the positions the store found. It does
// not ask KeyWaiters. An unordered event hands nothing on.
func TestFinishedOrderedEventsAreHandedOnByPosition(t *testing.T) {
	st := &positionStore{waitersStore: waitersStore{Store: memstore.New(nil)}}
	h := newFreedHarness(t, st, st.Store)

	h.cold(h.build("cold-1", "k"), 7)
	if after := h.next("the claimed event"); !slices.Equal(after, []core.OrderPos{{Key: "k", Seq: 7}}) {
		t.Fatalf("handed on %v, want [{k 7}]", after)
	}
	h.waitDone("cold-1")
	h.hot(h.build("plain-1", ""))
	h.hot(h.build("hot-1", "h"))
	if after := h.next("the hot event"); !slices.Equal(after, []core.OrderPos{{Key: "after-hot-1", Seq: 3}}) {
		t.Fatalf("handed on %v, want the store's [{after-hot-1 3}]", after)
	}
	h.nothingMore()
	st.mu.Lock()
	asked := st.askedIDs
	st.mu.Unlock()
	if len(asked) != 1 || !slices.Equal(asked[0], []string{"hot-1"}) {
		t.Errorf("WaitingAfter asked for %v, want [[hot-1]]", asked)
	}
	if n := st.asked.Load(); n != 0 {
		t.Errorf("KeyWaiters was asked %d times, want 0", n)
	}
}

// With a store that cannot claim by position, a finished ordered event
// has the store asked whether an event waits behind it, and the poller
// woken for a full claim (nil) when one does.
func TestFinishedOrderedEventsWakeAFullClaimWithoutPositions(t *testing.T) {
	st := &waitersStore{Store: memstore.New(nil)}
	h := newFreedHarness(t, st, st.Store)
	h.cold(h.build("cold-1", "k"), 7)
	if after := h.next("the wake-up"); after != nil {
		t.Fatalf("handed on %v, want a full claim (nil)", after)
	}
	if n := st.asked.Load(); n != 1 {
		t.Errorf("the store was asked %d times whether events wait, want 1", n)
	}
	h.waitDone("cold-1")
	h.hot(h.build("plain-1", ""))
	h.nothingMore()
}

// An ordered event of a type without a listener, marked DEAD by
// Unhandled: UnhandledDead, frees its key under the skip policy as a
// failed event does (its position is handed on), and holds it under the
// block policy (nothing is).
func TestUnhandledDeadFreesItsKeyUnderTheSkipPolicy(t *testing.T) {
	st := &positionStore{waitersStore: waitersStore{Store: memstore.New(nil)}}
	h := newFreedHarnessWith(t, st, st.Store, dispatcher.Config{Unhandled: dispatcher.UnhandledDead})
	build := func(id string, policy core.DeadPolicy) core.Envelope {
		env, err := core.NewEvent("NoListener").ID(id).OrderKey("k").OnDead(policy).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	waitDead := func(id string) {
		testsupport.WaitFor(t, waitTimeout, id+" DEAD", func() bool {
			r, ok := st.Get(id)
			return ok && r.Status == core.StatusDead
		})
	}
	h.cold(build("skip-1", core.SkipOnDead), 4)
	if after := h.next("the skipped event's key"); !slices.Equal(after, []core.OrderPos{{Key: "k", Seq: 4}}) {
		t.Fatalf("handed on %v, want [{k 4}]", after)
	}
	waitDead("skip-1")
	h.cold(build("block-1", core.BlockOnDead), 5)
	waitDead("block-1")
	h.nothingMore()
}
