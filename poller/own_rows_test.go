package poller_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/registry"
)

// ownRows is a started dispatcher on a memstore whose listener of "E"
// records deliveries by id and blocks the first call of the events named
// in its gates until their gate opens (started is closed when that call
// begins), for the cases about this node's own leased rows.
type ownRows struct {
	t       *testing.T
	mem     *memstore.Store
	d       *dispatcher.Dispatcher
	q       handoff.Queue
	logs    *testsupport.LogBuffer
	gates   map[string]*gate
	mu      sync.Mutex
	calls   map[string]int // listener calls begun, by event id
	got     map[string]int // listener calls ended, by event id
	started map[string]chan struct{}
}

// gate holds back the listener of one event until opened.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func newOwnRows(t *testing.T, cfg dispatcher.Config, blocked ...string) *ownRows {
	t.Helper()
	h := &ownRows{t: t, mem: memstore.New(nil), logs: &testsupport.LogBuffer{}, gates: map[string]*gate{},
		calls: map[string]int{}, got: map[string]int{}, started: map[string]chan struct{}{}}
	for _, id := range blocked {
		h.gates[id] = &gate{ch: make(chan struct{})}
		h.started[id] = make(chan struct{})
	}
	reg := registry.New()
	reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		h.mu.Lock()
		h.calls[env.ID()]++
		first := h.calls[env.ID()] == 1
		h.mu.Unlock()
		if g, ok := h.gates[env.ID()]; ok && first {
			close(h.started[env.ID()])
			<-g.ch
		}
		h.mu.Lock()
		h.got[env.ID()]++
		h.mu.Unlock()
		return nil
	})
	cfg.Logger = h.logs.Logger()
	d, err := dispatcher.New(h.mem, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.d, h.q = d, handoff.Of(d, "")
	t.Cleanup(func() {
		for _, g := range h.gates {
			g.open()
		}
		_ = d.Close(stopCtx(t, waitTimeout))
	})
	return h
}

// poller returns a poller of st (the memstore, or a wrapper of it) feeding
// the dispatcher, with no ordinary poll but the first for an hour.
func (h *ownRows) poller(st core.Store) *poller.Poller {
	h.t.Helper()
	return h.pollerObserved(st, nil)
}

// pollerObserved is poller with obs as its Observer.
func (h *ownRows) pollerObserved(st core.Store, obs core.Observer) *poller.Poller {
	h.t.Helper()
	p, err := poller.New(st, h.d, poller.Config{Interval: time.Hour, SkipRecent: -1, Logger: h.logs.Logger(), Observer: obs})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// publish inserts event id with a payload of about size bytes, leased to
// this node as Publish does, and offers it to the hot queue.
func (h *ownRows) publish(id string, size int) bool {
	h.t.Helper()
	env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{"p":"` + strings.Repeat("x", size) + `"}`).Build()
	if err != nil {
		h.t.Fatal(err)
	}
	lease := h.q.HotLease(env)
	if err := h.mem.Insert(context.Background(), nil, env, lease); err != nil {
		h.t.Fatal(err)
	}
	return h.q.EnqueueHot(env, lease)
}

// delivered reports whether id's listener ran to its end.
func (h *ownRows) delivered(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[id] > 0
}

// A hot event the dispatcher refused for its MaxHeldBytes budget stays in
// the database leased to this node: the next claim takes this node's own
// rows again and delivers it once it fits, even while the dispatcher
// still holds other events (it used to leave it to the lease's end).
func TestOverBudgetHotDropIsClaimedByTheNextPoll(t *testing.T) {
	h := newOwnRows(t, dispatcher.Config{Workers: 2, MaxHeldBytes: 1000}, "held", "keeper")
	p := h.poller(h.mem)
	if _, err := p.PollOnce(t.Context()); err != nil { // nothing to claim yet: the baseline of own claims
		t.Fatal(err)
	}
	if !h.publish("held", 600) {
		t.Fatal("the first event was not taken")
	}
	if h.publish("big", 600) {
		t.Fatal("an event over the budget was taken")
	}
	// The first event finishes; a small one keeps the dispatcher busy,
	// with room left in the budget for the dropped one.
	h.gates["held"].open()
	testsupport.WaitFor(t, waitTimeout, "the first event to finish", func() bool { return h.q.Held() == 0 })
	if !h.publish("keeper", 10) {
		t.Fatal("the small event was not taken")
	}
	testsupport.WaitFor(t, waitTimeout, "the dropped event delivered by a claim while another is held", func() bool {
		if _, err := p.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if h.q.Held() == 0 {
			t.Fatal("the dispatcher holds nothing: the test no longer shows a claim that may skip own rows")
		}
		return h.delivered("big")
	})
}

// An event whose listener is stuck past InFlightTTL is claimed again by
// this node's next polls, and delivered by a second run, though the
// dispatcher let nothing go since the last claim that took this node's
// rows: those claims leave this node's rows out only while none is held
// past the TTL (they used to, until some other event was let go).
func TestEventHeldPastInFlightTTLIsClaimedAgain(t *testing.T) {
	h := newOwnRows(t, dispatcher.Config{Workers: 2, InFlightTTL: 50 * time.Millisecond}, "stuck")
	p := h.poller(h.mem)
	if _, err := p.PollOnce(t.Context()); err != nil { // nothing to claim yet: the baseline of own claims
		t.Fatal(err)
	}
	if !h.publish("stuck", 1) {
		t.Fatal("the event was not taken")
	}
	testsupport.Recv(t, waitTimeout, h.started["stuck"], "the stuck listener")
	testsupport.WaitFor(t, waitTimeout, "the stuck event delivered by a claim past InFlightTTL", func() bool {
		if _, err := p.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		return h.delivered("stuck")
	})
}

// Without InFlightTTL, an event whose listener is slow is never claimed
// again while it is held: the claims leave this node's rows out.
func TestHeldEventIsNotClaimedAgainWithoutInFlightTTL(t *testing.T) {
	h := newOwnRows(t, dispatcher.Config{Workers: 2}, "slow")
	st := &spyStore{Store: h.mem}
	p := h.poller(st)
	if !h.publish("slow", 1) {
		t.Fatal("the event was not taken")
	}
	testsupport.Recv(t, waitTimeout, h.started["slow"], "the slow listener")
	for i := range 3 {
		if _, err := p.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if req := st.lastClaim(t); req.SkipOwn != (i > 0) {
			t.Fatalf("claim %d: SkipOwn = %v, want %v", i+1, req.SkipOwn, i > 0)
		}
	}
	h.mu.Lock()
	calls := h.calls["slow"]
	h.mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d listener calls of the held event, want 1", calls)
	}
}

// The poller claims only what fits in the dispatcher's MaxHeldBytes, from
// its first claim on: before any payload size is known it claims one row,
// then as many as fit at the size measured, so the rows it cannot hold
// stay unowned, for any node, instead of leased here until the lease
// ends (the first claim used to take a whole batch: 20 rows of which 2
// fit). Every event is delivered once the budget frees.
func TestClaimsLeaseOnlyWhatFitsTheByteBudget(t *testing.T) {
	ids := idsOf("row", 20)
	h := newOwnRows(t, dispatcher.Config{Workers: 1, MaxHeldBytes: 1000}, ids...)
	p := h.poller(h.mem)
	for _, id := range ids { // about 400 bytes each: 2 fit
		env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{"p":"` + strings.Repeat("x", 390) + `"}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.mem.Insert(context.Background(), nil, env, core.Lease{}); err != nil {
			t.Fatal(err)
		}
	}
	leased := func() (n int) {
		for _, id := range ids {
			if row(t, h.mem, id).LockedBy != "" {
				n++
			}
		}
		return n
	}
	if res := pollOnce(t, p); res.Read != 1 || leased() != 1 {
		t.Fatalf("first claim read %d rows and leased %d, want 1 and 1 (no payload size known yet)", res.Read, leased())
	}
	testsupport.Recv(t, waitTimeout, h.started[ids[0]], "the first event's listener")
	if res := pollOnce(t, p); res.Enqueued != 1 {
		t.Fatalf("second claim enqueued %d, want 1 (room for one more of 400 bytes)", res.Enqueued)
	}
	for range 3 {
		if res := pollOnce(t, p); res.Read != 0 || !res.Full {
			t.Fatalf("claim with the budget used up: %+v, want nothing read (no room)", res)
		}
	}
	if n := leased(); n != 2 {
		t.Fatalf("%d rows leased to this node with 2 held, want 2", n)
	}
	for _, id := range ids {
		h.gates[id].open()
	}
	testsupport.WaitFor(t, waitTimeout, "every event delivered as the budget frees", func() bool {
		pollOnce(t, p)
		for _, id := range ids {
			if !h.delivered(id) {
				return false
			}
		}
		return true
	})
}

// Rows a claim leased but could not hand over (the queue filled
// meanwhile, without the dispatcher letting anything go) are read again
// by the next claim, though the dispatcher still holds events: they are
// this node's rows, and not held.
func TestRowsNotHandedOverAreTakenByTheNextClaim(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := &spyStore{Store: memstore.New(clock.Now)}
	for _, id := range []string{"a", "b", "c"} {
		insert(t, st.Store, id)
	}
	clock.Advance(time.Minute)
	q := newRoomQueue(3)
	q.setPhantomRoom(0)
	p, err := poller.NewWithQueue(st, q, poller.Config{Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	q.setRoom(1)
	q.setPhantomRoom(2) // room for 3 reported, 1 taken
	pollOnce(t, p)
	if got := q.ids(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("enqueued %v, want [a]", got)
	}
	q.setPhantomRoom(0)
	q.setRoom(5)
	pollOnce(t, p)
	if req := st.lastClaim(t); req.SkipOwn {
		t.Fatal("the claim after rows left leased here skipped this node's rows")
	}
	if got := q.ids(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("enqueued %v, want [a b c]", got)
	}
}

// A node woken again and again (PostgreSQL announces every unowned
// insert of every node) still re-takes its own hot-queue drops: a woken
// poll leaves this node's rows out only while every one of them is held,
// as an ordinary poll does, instead of always.
func TestWokenPollsTakeOwnDroppedRows(t *testing.T) {
	h := newOwnRows(t, dispatcher.Config{Workers: 1, HotCapacity: 1}, "first")
	claimed := &claimSignal{ch: make(chan struct{})}
	p := h.pollerObserved(h.mem, claimed)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, waitTimeout)) })
	// The first cycle runs at Start: it must be over before the events
	// are published, or it could claim the second one between its insert
	// and its hand-over (the hand-over then finds it held, and the third
	// one finds room in the hot queue).
	testsupport.Recv(t, waitTimeout, claimed.ch, "the poller's first claim")
	h.publish("first", 1)
	testsupport.Recv(t, waitTimeout, h.started["first"], "the first event's listener")
	if !h.publish("second", 1) { // queued behind it
		t.Fatal("the second event was not queued")
	}
	if h.publish("dropped", 1) {
		t.Fatal("an event past the hot queue's capacity was queued")
	}
	h.gates["first"].open()
	testsupport.WaitFor(t, waitTimeout, "the dropped event delivered through woken polls", func() bool {
		p.Wake()
		return h.delivered("dropped")
	})
}

// lostClaim is a store whose next claim leases its rows but reports an
// error, as a claim does whose rows or commit answer were lost (a
// timeout while reading the rows of UPDATE ... RETURNING).
type lostClaim struct {
	*memstore.Store
	failNext atomic.Bool
}

func (s *lostClaim) ClaimDue(ctx context.Context, req core.ClaimRequest) ([]core.Record, error) {
	recs, err := s.Store.ClaimDue(ctx, req)
	if err == nil && len(recs) > 0 && s.failNext.CompareAndSwap(true, false) {
		return nil, errors.New("reading the claimed rows: context deadline exceeded")
	}
	return recs, err
}

// Rows a failed claim leased to this node after all are taken by the next
// claim, though the dispatcher still holds another event.
func TestRowsOfAFailedClaimAreTakenByTheNext(t *testing.T) {
	h := newOwnRows(t, dispatcher.Config{Workers: 2}, "busy")
	st := &lostClaim{Store: h.mem}
	p := h.poller(st)
	if !h.publish("busy", 1) { // held until the end: the claims may skip own rows
		t.Fatal("the busy event was not taken")
	}
	if _, err := p.PollOnce(t.Context()); err != nil { // takes nothing new: the baseline of own claims
		t.Fatal(err)
	}
	insert(t, h.mem, "unowned")
	st.failNext.Store(true)
	if _, err := p.PollOnce(t.Context()); err == nil {
		t.Fatal("the lost claim reported no error")
	}
	testsupport.WaitFor(t, waitTimeout, "the event the failed claim leased, delivered", func() bool {
		if _, err := p.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		return h.delivered("unowned")
	})
}

// claimSignal is an Observer that closes ch at the first claim it sees.
type claimSignal struct {
	core.NopObserver
	once sync.Once
	ch   chan struct{}
}

func (c *claimSignal) Claimed(string, int, time.Duration, error) { c.once.Do(func() { close(c.ch) }) }
