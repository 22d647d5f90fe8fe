package poller_test

import (
	"context"
	"errors"
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

// A hot event the dispatcher refused for its MaxHeldBytes budget stays in
// the database leased to this node: the next claim takes this node's own
// rows again and delivers it once it fits, even while the dispatcher
// still holds other events (it used to leave it to the lease's end).
func TestOverBudgetHotDropIsClaimedByTheNextPoll(t *testing.T) {
	st := memstore.New(nil)
	logs := &testsupport.LogBuffer{}
	blocker, keeper := make(chan struct{}), make(chan struct{})
	var once, keepOnce sync.Once
	unblock := func() { once.Do(func() { close(blocker) }) }
	release := func() { keepOnce.Do(func() { close(keeper) }) }
	t.Cleanup(unblock)
	t.Cleanup(release)
	var mu sync.Mutex
	got := map[string]int{}
	reg := registry.New()
	reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		switch env.ID() {
		case "held":
			<-blocker
		case "keeper":
			<-keeper
		}
		mu.Lock()
		got[env.ID()]++
		mu.Unlock()
		return nil
	})
	d, err := dispatcher.New(st, reg, dispatcher.Config{Workers: 2, MaxHeldBytes: 1000, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unblock(); release(); _ = d.Close(stopCtx(t, waitTimeout)) })
	q := handoff.Of(d, "")
	publish := func(id string, size int) bool {
		env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{"p":"` + strings.Repeat("x", size) + `"}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		lease := q.HotLease(env)
		if err := st.Insert(context.Background(), nil, env, lease); err != nil {
			t.Fatal(err)
		}
		return q.EnqueueHot(env, lease)
	}
	p, err := poller.New(st, d, poller.Config{Interval: time.Hour, SkipRecent: -1, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollOnce(t.Context()); err != nil { // nothing to claim yet: the baseline of own claims
		t.Fatal(err)
	}
	if !publish("held", 600) {
		t.Fatal("the first event was not taken")
	}
	if publish("big", 600) {
		t.Fatal("an event over the budget was taken")
	}
	// The first event finishes; a small one keeps the dispatcher busy,
	// with room left in the budget for the dropped one.
	unblock()
	testsupport.WaitFor(t, waitTimeout, "the first event to finish", func() bool { return q.Held() == 0 })
	if !publish("keeper", 10) {
		t.Fatal("the small event was not taken")
	}
	testsupport.WaitFor(t, waitTimeout, "the dropped event delivered by a claim while another is held", func() bool {
		if _, err := p.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if q.Held() == 0 {
			t.Fatal("the dispatcher holds nothing: the test no longer shows a claim that may skip own rows")
		}
		mu.Lock()
		defer mu.Unlock()
		return got["big"] > 0
	})
}

// A node woken again and again (PostgreSQL announces every unowned
// insert of every node) still re-takes its own hot-queue drops: a woken
// poll leaves this node's rows out only while every one of them is held,
// as an ordinary poll does, instead of always.
func TestWokenPollsTakeOwnDroppedRows(t *testing.T) {
	st := memstore.New(nil)
	logs := &testsupport.LogBuffer{}
	started, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var mu sync.Mutex
	got := map[string]int{}
	reg := registry.New()
	reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		if env.ID() == "first" {
			close(started)
			<-gate
		}
		mu.Lock()
		got[env.ID()]++
		mu.Unlock()
		return nil
	})
	d, err := dispatcher.New(st, reg, dispatcher.Config{Workers: 1, HotCapacity: 1, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open(); _ = d.Close(stopCtx(t, waitTimeout)) })
	q := handoff.Of(d, "")
	publish := func(id string) bool {
		env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		lease := q.HotLease(env)
		if err := st.Insert(context.Background(), nil, env, lease); err != nil {
			t.Fatal(err)
		}
		return q.EnqueueHot(env, lease)
	}
	// No ordinary poll but the first: every later one is woken.
	p, err := poller.New(st, d, poller.Config{Interval: time.Hour, SkipRecent: -1, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, waitTimeout)) })
	publish("first")
	testsupport.Recv(t, waitTimeout, started, "the first event's listener")
	if !publish("second") { // queued behind it
		t.Fatal("the second event was not queued")
	}
	if publish("dropped") {
		t.Fatal("an event past the hot queue's capacity was queued")
	}
	open()
	testsupport.WaitFor(t, waitTimeout, "the dropped event delivered through woken polls", func() bool {
		p.Wake()
		mu.Lock()
		defer mu.Unlock()
		return got["dropped"] > 0
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
	mem := memstore.New(nil)
	st := &lostClaim{Store: mem}
	logs := &testsupport.LogBuffer{}
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var mu sync.Mutex
	got := map[string]int{}
	reg := registry.New()
	reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		if env.ID() == "busy" {
			<-gate
		}
		mu.Lock()
		got[env.ID()]++
		mu.Unlock()
		return nil
	})
	d, err := dispatcher.New(mem, reg, dispatcher.Config{Workers: 2, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open(); _ = d.Close(stopCtx(t, waitTimeout)) })
	q := handoff.Of(d, "")
	busy, err := core.NewEvent("E").ID("busy").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	lease := q.HotLease(busy)
	if err := mem.Insert(context.Background(), nil, busy, lease); err != nil {
		t.Fatal(err)
	}
	if !q.EnqueueHot(busy, lease) { // held until the end: the claims may skip own rows
		t.Fatal("the busy event was not taken")
	}
	p, err := poller.New(st, d, poller.Config{Interval: time.Hour, SkipRecent: -1, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollOnce(t.Context()); err != nil { // takes nothing new: the baseline of own claims
		t.Fatal(err)
	}
	insert(t, mem, "unowned")
	st.failNext.Store(true)
	if _, err := p.PollOnce(t.Context()); err == nil {
		t.Fatal("the lost claim reported no error")
	}
	testsupport.WaitFor(t, waitTimeout, "the event the failed claim leased, delivered", func() bool {
		if _, err := p.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return got["unowned"] > 0
	})
}
