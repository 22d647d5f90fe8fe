package poller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// Wake makes a resting poller poll at once (also when called before
// Start); the woken claim ignores SkipRecent, so a row just committed is
// taken; other polls keep it.
func TestWakePollsAtOnceWithoutSkipRecent(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := &spyStore{Store: memstore.New(clock.Now)}
	q := newFakeQueue(10)
	p, err := poller.NewWithQueue(st, q, poller.Config{Interval: time.Hour, SkipRecent: time.Minute, Now: clock.Now,
		Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	p.Wake() // before Start: the first poll happens at once
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	claims := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.claims)
	}
	testsupport.WaitFor(t, 10*time.Second, "the poll of the early wake-up", func() bool { return claims() == 1 })

	insert(t, st.Store, "fresh") // created now: SkipRecent would hide it
	p.Wake()
	testsupport.WaitFor(t, 10*time.Second, "the woken poll's enqueue", func() bool { return len(q.ids()) == 1 })
	if req := st.lastClaim(t); req.SkipRecent != 0 {
		t.Errorf("woken claim: SkipRecent = %v, want 0", req.SkipRecent)
	}
	if got := q.ids(); got[0] != "fresh" {
		t.Errorf("enqueued %v, want [fresh]", got)
	}
	before := claims()
	// A later poll of the same poller that is not woken keeps SkipRecent;
	// PollOnce is such a poll.
	if _, err := p.PollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if req := st.lastClaim(t); req.SkipRecent != time.Minute {
		t.Errorf("PollOnce claim: SkipRecent = %v, want 1m", req.SkipRecent)
	}
	if claims() != before+1 {
		t.Errorf("claims = %d, want %d", claims(), before+1)
	}
}

// claimLog records the claims of several stores in the order they happen.
type claimLog struct {
	mu     sync.Mutex
	claims []string // "<store>:<SkipRecent>"
}

func (l *claimLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.claims)
}

// loggedStore is a memory store whose claims go to a shared claimLog.
type loggedStore struct {
	*memstore.Store
	id  string
	log *claimLog
}

func (s *loggedStore) ClaimDue(ctx context.Context, req core.ClaimRequest) ([]core.Record, error) {
	s.log.mu.Lock()
	s.log.claims = append(s.log.claims, fmt.Sprintf("%s:%v", s.id, req.SkipRecent))
	s.log.mu.Unlock()
	return s.Store.ClaimDue(ctx, req)
}

// restingPoller returns a poller of several stores (none yet) that rests
// an hour between rounds and skips rows younger than a minute, on a
// clock of the test's own.
func restingPoller(t *testing.T) (*testsupport.Clock, *poller.Poller) {
	t.Helper()
	clock := testsupport.NewClock(testsupport.Epoch)
	p, err := poller.NewMulti(poller.Config{Interval: time.Hour, SkipRecent: time.Minute, Now: clock.Now,
		Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return clock, p
}

// A store's own wake-up (a tenant database's notification) makes the next
// poll read that store, whatever the Selector would pick, without
// SkipRecent; the other stores keep SkipRecent. Stores woken together are
// polled in the order of their wake-ups.
func TestWakeStorePollsThatStoreFirst(t *testing.T) {
	clock, p := restingPoller(t)
	log := &claimLog{}
	queues := map[string]*fakeQueue{}
	for _, id := range []string{"a", "b", "c"} {
		st := &loggedStore{Store: memstore.New(clock.Now), id: id, log: log}
		insert(t, st.Store, id+"-fresh") // created now: SkipRecent hides it
		queues[id] = newFakeQueue(10)
		if err := p.AddQueue(id, st, queues[id]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	// The first poll runs at Start: every store in turn, then the poller
	// rests for an hour.
	testsupport.WaitFor(t, 10*time.Second, "the polls at Start", func() bool { return len(log.all()) == 3 })
	if got, want := log.all(), []string{"a:1m0s", "b:1m0s", "c:1m0s"}; !slices.Equal(got, want) {
		t.Fatalf("claims at Start %v, want %v", got, want)
	}

	// Round-robin would read a next; the wake-up of c reads c, and the
	// poller rests on: the other stores are not polled for it (they were
	// each time, a whole round of the set per notification of one).
	p.WakeStore("c")
	testsupport.WaitFor(t, 10*time.Second, "the woken poll of c", func() bool { return len(log.all()) == 4 })
	if got, want := log.all()[3:], []string{"c:0s"}; !slices.Equal(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	if got := queues["c"].ids(); !slices.Equal(got, []string{"c-fresh"}) {
		t.Fatalf("c enqueued %v", got)
	}
	if len(queues["a"].ids())+len(queues["b"].ids()) != 0 {
		t.Fatalf("a store that was not woken gave up a row younger than SkipRecent: a %v, b %v", queues["a"].ids(), queues["b"].ids())
	}

	// Two wake-ups one after the other: both stores are read without
	// SkipRecent, b first. (The poller may start b's poll before a's
	// wake-up arrives and go on with the rotation meanwhile, so only the
	// order of the two woken polls is certain.)
	p.WakeStore("b")
	p.WakeStore("a")
	testsupport.WaitFor(t, 10*time.Second, "the woken polls of b and a", func() bool {
		return len(queues["a"].ids()) == 1 && len(queues["b"].ids()) == 1
	})
	after := log.all()[4:]
	ib, ia := slices.Index(after, "b:0s"), slices.Index(after, "a:0s")
	if ib < 0 || ia < 0 || ib > ia {
		t.Fatalf("claims after the wake-ups of b and a: %v, want b:0s, then a:0s", after)
	}
	// Every poll since Start served a wake-up: none kept SkipRecent.
	for _, c := range log.all()[3:] {
		if !strings.HasSuffix(c, ":0s") {
			t.Errorf("claims since Start %v: %s was no woken poll", log.all()[3:], c)
		}
	}
}

// A store added to a started poller is polled at once, as a woken store
// is, not after the rest of the interval (an hour here): a tenant
// database added with a backlog waited for the next round.
func TestAddedStoreIsPolledAtOnce(t *testing.T) {
	clock, p := restingPoller(t)
	log := &claimLog{}
	a := &loggedStore{Store: memstore.New(clock.Now), id: "a", log: log}
	if err := p.AddQueue("a", a, newFakeQueue(10)); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	testsupport.WaitFor(t, 10*time.Second, "the poll at Start", func() bool { return len(log.all()) == 1 })

	b := &loggedStore{Store: memstore.New(clock.Now), id: "b", log: log}
	insert(t, b.Store, "b-backlog")
	qb := newFakeQueue(10)
	if err := p.AddQueue("b", b, qb); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the added store's poll", func() bool { return len(qb.ids()) == 1 })
	if got, want := log.all(), []string{"a:1m0s", "b:0s"}; !slices.Equal(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
}

// A fresh start (package outbox's and tenant's pollers) takes the rows
// from before Start however recent, until a poll is not full: then
// SkipRecent applies again, also on a clock that stands still (a test's),
// where it stayed off for good.
func TestFreshStartEndsAtTheFirstPollNotFull(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	p, err := poller.NewMulti(poller.Config{Interval: 10 * time.Millisecond, BacklogInterval: 10 * time.Millisecond,
		SkipRecent: time.Minute, Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	log := &claimLog{}
	st := &loggedStore{Store: memstore.New(clock.Now), id: "a", log: log}
	insert(t, st.Store, "a-before")
	if err := p.AddQueue("a", st, newFakeQueue(10)); err != nil {
		t.Fatal(err)
	}
	handoff.FreshStart(p)
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	testsupport.WaitFor(t, 10*time.Second, "three polls", func() bool { return len(log.all()) >= 3 })
	got := log.all()
	if got[0] != "a:0s" {
		t.Errorf("first poll %s, want SkipRecent 0 (a fresh start)", got[0])
	}
	for _, c := range got[1:] {
		if c != "a:1m0s" {
			t.Fatalf("polls %v, want SkipRecent back to 1m after the first (not full)", got)
		}
	}
}
