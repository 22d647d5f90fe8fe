package poller_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// multiFixture is a shared dispatcher over three memory stores holding 3,
// 2 and 1 unowned rows, and a poller over them.
type multiFixture struct {
	stores map[string]*memstore.Store
	queues map[string]handoff.Queue
	d      *dispatcher.Dispatcher
	p      *poller.Poller
	logs   *testsupport.LogBuffer
}

func newMultiFixture(t *testing.T, sel core.Selector) *multiFixture {
	t.Helper()
	f := &multiFixture{stores: map[string]*memstore.Store{}, queues: map[string]handoff.Queue{}, logs: &testsupport.LogBuffer{}}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := registry.New()
	reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	d, err := dispatcher.NewMulti(reg, dispatcher.Config{Workers: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	f.p, err = poller.NewMulti(poller.Config{BatchSize: 1, SkipRecent: -1, Selector: sel, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range map[string]int{"a": 3, "b": 2, "c": 1} {
		st := memstore.New(nil)
		st.Changed = make(chan struct{}, 1)
		f.stores[id] = st
		for i := range n {
			env, err := core.NewEvent("E").ID(fmt.Sprintf("%s-%d", id, i)).PayloadJSONString(`{}`).Build()
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Insert(context.Background(), nil, env, core.Lease{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.AddStore(id, st); err != nil {
			t.Fatal(err)
		}
		f.queues[id] = handoff.Of(d, id)
		if err := f.p.Add(id, st, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}

// polls runs n polls, each after the events of the one before are DONE and
// released by the dispatcher, and returns "<store><enqueued>" per poll.
//
// Waiting for DONE alone is not enough: the dispatcher holds an event until
// just after its DONE write, and the poller claims up to Held() more rows
// than its batch (rows it holds are claimable by it). A poll in that window
// would claim two rows of a store, not one.
func (f *multiFixture) polls(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	enqueued := map[string]int{}
	for range n {
		res, err := f.p.PollOnce(context.Background())
		if err != nil {
			t.Fatalf("PollOnce: %v", err)
		}
		got = append(got, fmt.Sprintf("%s%d", res.Store, res.Enqueued))
		enqueued[res.Store] += res.Enqueued
		st, q, want := f.stores[res.Store], f.queues[res.Store], enqueued[res.Store]
		waitFor(t, "the polled events to be DONE and released", func() bool {
			return st.Count(core.StatusDone) == want && q.Held() == 0
		}, st.Changed)
	}
	return got
}

func TestMultiPollerSelectors(t *testing.T) {
	cases := []struct {
		name string
		sel  core.Selector
		want []string
	}{
		// One batch (of 1) from each store in turn, in id order.
		{"RoundRobin", core.RoundRobin{}, []string{"a1", "b1", "c1", "a1", "b1", "c0", "a1", "b0", "c0", "a0"}},
		// Stay on a store until a poll comes back empty.
		{"DrainFirst", core.DrainFirst{}, []string{"a1", "a1", "a1", "a0", "b1", "b1", "b0", "c1", "c0", "a0", "b0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newMultiFixture(t, c.sel)
			if got := f.polls(t, len(c.want)); !slices.Equal(got, c.want) {
				t.Fatalf("poll order %v, want %v", got, c.want)
			}
			for id, st := range f.stores {
				if n := st.Count(core.StatusDone); n != map[string]int{"a": 3, "b": 2, "c": 1}[id] {
					t.Errorf("store %s: %d DONE", id, n)
				}
			}
			if !strings.Contains(f.logs.String(), "store=a") {
				t.Errorf("poll logs without the store id:\n%s", f.logs.String())
			}
		})
	}
}

func TestMultiPollerAddRemove(t *testing.T) {
	p, err := poller.NewMulti(poller.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.PollOnce(context.Background()); err != nil || res != (poller.Result{}) {
		t.Fatalf("PollOnce without stores = %+v, %v; want nothing", res, err)
	}
	st := memstore.New(nil)
	d, _ := dispatcher.NewMulti(registry.New(), dispatcher.Config{})
	defer d.Close(context.Background())
	if err := d.AddStore("x", st); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		id string
		s  poller.Store
		d  *dispatcher.Dispatcher
	}{{"", st, d}, {"x", nil, d}, {"x", (*memstore.Store)(nil), d}, {"x", st, nil}, {"y", st, d}} {
		if err := p.Add(bad.id, bad.s, bad.d); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("Add(%q, %v, %v) = %v, want ErrInvalidConfig", bad.id, bad.s != nil, bad.d != nil, err)
		}
	}
	if err := p.Add("x", st, d); err != nil {
		t.Fatal(err)
	}
	if err := p.Add("x", st, d); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("Add twice = %v", err)
	}
	if got := p.Stores(); !slices.Equal(got, []string{"x"}) {
		t.Errorf("Stores = %v", got)
	}
	p.Remove("x")
	p.Remove("x") // unknown: ignored
	if got := p.Stores(); len(got) != 0 {
		t.Errorf("Stores after Remove = %v", got)
	}
}

// A store whose polls fail (a database down, or not answering: each
// failed poll can take QueryTimeout) is skipped for a while, doubling
// from 1 s, so the other stores take its turns: it held up the polls of
// every other store turn after turn. A lone store is polled at every
// turn all the same.
func TestFailingStoreIsSkippedForAWhile(t *testing.T) {
	var claims sync.Map // store id -> *atomic.Int32
	count := func(id string) *atomic.Int32 {
		v, _ := claims.LoadOrStore(id, new(atomic.Int32))
		return v.(*atomic.Int32)
	}
	stores := map[string]*memstore.Store{}
	for _, id := range []string{"bad", "good"} {
		st := memstore.New(nil)
		st.Fail = func(op, _ string) error {
			if op != "claim" {
				return nil
			}
			count(id).Add(1)
			if id == "bad" {
				return errors.New("connection refused")
			}
			return nil
		}
		stores[id] = st
	}
	startPolling(t, poller.Config{Interval: time.Millisecond, BacklogInterval: time.Millisecond}, stores)
	testsupport.WaitFor(t, waitTimeout, "50 polls of the good store", func() bool { return count("good").Load() >= 50 }, nil)
	// In round robin the bad store had as many turns; backing off, it is
	// tried again after 1 s, then 2 s.
	if n := count("bad").Load(); n > 3 {
		t.Errorf("the failing store was polled %d times while the good one was polled 50 times, want at most 3", n)
	}
}

// Once a failing store's skip ends, whether its database answers again is
// found out by a probe beside the loop, not by a poll in it: a poll of a
// database that does not answer takes QueryTimeout, and in the loop it
// held up the polls of every other store (and the claims of ordered
// events' successors) for that long at every try. When the probe
// succeeds, the store is polled again.
func TestFailingStoreIsProbedBesideTheLoop(t *testing.T) {
	var (
		goodClaims, badClaims, badProbes atomic.Int32
		hanging                          = make(chan string, 1) // the bad store's call that hangs
		answer                           = make(chan struct{})  // closed: the bad store answers again
		answered                         atomic.Bool
	)
	hang := func(op string) error {
		select {
		case hanging <- op:
		default:
		}
		select {
		case <-answer:
			return nil
		case <-time.After(20 * time.Second):
			return errors.New("i/o timeout")
		}
	}
	bad, good := memstore.New(nil), memstore.New(nil)
	bad.Fail = func(op, _ string) error {
		switch {
		case answered.Load():
			if op == "claim" {
				badClaims.Add(1)
			}
			return nil
		case op == "claim" && badClaims.Add(1) == 1:
			return errors.New("connection refused") // the first failure: skipped for 1 s
		case op == "claim":
			return hang(op) // a poll in the loop (the fault)
		case op == "reap":
			badProbes.Add(1)
			return hang(op)
		}
		return nil
	}
	good.Fail = func(op, _ string) error {
		if op == "claim" {
			goodClaims.Add(1)
		}
		return nil
	}
	startPolling(t, poller.Config{Interval: time.Millisecond, BacklogInterval: time.Millisecond, ReapInterval: time.Hour},
		map[string]*memstore.Store{"bad": bad, "good": good})
	t.Cleanup(func() {
		if answered.CompareAndSwap(false, true) {
			close(answer)
		}
	})

	var op string
	select {
	case op = <-hanging:
	case <-time.After(waitTimeout):
		t.Fatal("the failing store was not tried again after its skip")
	}
	before := goodClaims.Load()
	testsupport.WaitFor(t, 5*time.Second, fmt.Sprintf("20 polls of the good store while the bad store's %s hangs", op),
		func() bool { return goodClaims.Load() >= before+20 }, nil)
	if op != "reap" {
		t.Errorf("the failing store was tried again by a %q, want its probe (reap)", op)
	}
	claimsBefore := badClaims.Load()
	answered.Store(true)
	close(answer)
	testsupport.WaitFor(t, waitTimeout, "a poll of the store whose probe succeeded",
		func() bool { return badClaims.Load() > claimsBefore }, nil)
	if n := badProbes.Load(); n != 1 {
		t.Errorf("%d probes ran, want 1 (one at a time)", n)
	}
}

// startPolling runs a dispatcher and a poller of several stores over
// stores until t ends, both logging to cfg.Logger (discarded when nil).
func startPolling(t *testing.T, cfg poller.Config, stores map[string]*memstore.Store) {
	t.Helper()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := dispatcher.NewMulti(registry.New(), dispatcher.Config{Workers: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	cfg.Logger = log
	p, err := poller.NewMulti(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for id, st := range stores {
		if err := d.AddStore(id, st); err != nil {
			t.Fatal(err)
		}
		if err := p.Add(id, st, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
}

// A store whose reaping fails logs one WARN naming it, then its recovery:
// the reaping WARN repeated every ReapInterval for the whole outage, and
// named its store only inside the error text.
func TestFailingReapIsLoggedOncePerIncident(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	var reaps atomic.Int32
	var failing atomic.Bool
	failing.Store(true)
	st := memstore.New(nil)
	st.Fail = func(op, _ string) error {
		if op == "reap" {
			reaps.Add(1)
			if failing.Load() {
				return errors.New("connection refused")
			}
		}
		return nil
	}
	startPolling(t, poller.Config{Interval: time.Hour, ReapInterval: 2 * time.Millisecond, Logger: logger},
		map[string]*memstore.Store{"s1": st, "s2": memstore.New(nil)})
	testsupport.WaitFor(t, waitTimeout, "5 failed reaps", func() bool { return reaps.Load() >= 5 }, nil)
	if n := logs.Count("level=WARN", "reaping expired leases failed", "store=s1"); n != 1 || logs.Count("level=WARN") != 1 {
		t.Fatalf("want one WARN naming store s1 for 5 failed reaps:\n%s", logs)
	}
	failing.Store(false)
	testsupport.WaitFor(t, waitTimeout, "the recovery line", func() bool {
		return logs.Count("level=INFO", "reaping expired leases recovered", "store=s1") == 1
	}, nil)
}
