package poller_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// roomQueue is a fakeQueue that takes room notices (handoff.RoomNotifier)
// and runs them when the test says the workers made room, and counts the
// events it let go (handoff.ReleaseCounter): none unless the test says
// so. It holds every event it took.
type roomQueue struct {
	*fakeQueue
	mu       sync.Mutex
	notices  []func()
	armed    chan struct{} // a signal per NotifyRoom
	released atomic.Uint64
}

func (q *roomQueue) Released() uint64 { return q.released.Load() }

func (q *roomQueue) Held() int {
	q.fakeQueue.mu.Lock()
	defer q.fakeQueue.mu.Unlock()
	return len(q.fakeQueue.inFlight)
}

func newRoomQueue(room int) *roomQueue {
	return &roomQueue{fakeQueue: newFakeQueue(room), armed: make(chan struct{}, 16)}
}

func (q *roomQueue) NotifyRoom(fn func()) {
	q.mu.Lock()
	q.notices = append(q.notices, fn)
	q.mu.Unlock()
	q.armed <- struct{}{}
}

func (q *roomQueue) armedCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.notices)
}

// makeRoom gives the queue n slots and runs the notices armed so far.
func (q *roomQueue) makeRoom(n int) {
	q.setRoom(n)
	q.mu.Lock()
	fns := q.notices
	q.notices = nil
	q.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// The first poll runs at Start, not after Interval: a process restarted
// after a crash delivers the rows left pending at once.
func TestFirstPollAtStart(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := memstore.New(clock.Now)
	insert(t, st, "left")
	clock.Advance(time.Minute) // older than SkipRecent
	q := newFakeQueue(10)
	p, err := poller.NewWithQueue(st, q, poller.Config{Interval: time.Hour, Now: clock.Now,
		Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	waitFor(t, "the poll at Start", func() bool { return len(q.ids()) == 1 }, q.signal)
}

// A backlog drains at the queue's pace: a poll that finds the cold queue
// full arms one room notice (however many polls find it full), and the
// notice makes the loop claim again at once, without waiting out
// BacklogInterval (an hour here).
func TestFullQueuePollsAgainOnRoomNotice(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := memstore.New(clock.Now)
	ids := idsOf("b", 6)
	for _, id := range ids {
		insert(t, st, id)
	}
	clock.Advance(time.Minute)
	q := newRoomQueue(0) // full
	p, err := poller.NewWithQueue(st, q, poller.Config{Interval: time.Hour, BacklogInterval: time.Hour, BatchSize: 2,
		Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	// Polls that find the queue full arm one notice between them.
	for range 3 {
		res, err := p.PollOnce(t.Context())
		if err != nil || !res.Full {
			t.Fatalf("PollOnce on a full queue = %+v, %v; want Full", res, err)
		}
	}
	if n := q.armedCount(); n != 1 {
		t.Fatalf("%d room notices armed by 3 polls of a full queue, want 1", n)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	// The poll at Start finds the queue still full: no second notice.
	// Room for 3: the loop claims 2 (a full batch), then 1 at once; the
	// queue is full again, a new notice is armed.
	q.makeRoom(3)
	waitFor(t, "the claims after the room notice", func() bool { return len(q.ids()) == 3 }, q.signal)
	recv(t, q.armed, "the first notice") // consumed by the polls before Start
	recv(t, q.armed, "a notice armed once the queue was full again")
	q.makeRoom(10)
	waitFor(t, "the rest of the backlog", func() bool { return len(q.ids()) == 6 }, q.signal)
}

// recv waits for a value on ch, failing the test at waitTimeout.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// While the dispatcher holds events and let none go since the last claim
// that took this node's rows, claims leave this node's rows out
// (SkipOwn): they are all held, and being the oldest they would fill the
// claim. Once it lets one go (a hot-queue drop), the next claim takes
// this node's rows again, and the dropped row is delivered.
func TestClaimsSkipOwnRowsWhileAllAreHeld(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := &spyStore{Store: memstore.New(clock.Now)}
	lease := core.Lease{Owner: queueOwner, Until: testsupport.Epoch.Add(time.Hour)}
	insertLeased(t, st.Store, "held", lease)    // queued here already
	insertLeased(t, st.Store, "dropped", lease) // a hot-queue drop, not yet counted
	insert(t, st.Store, "backlog")
	clock.Advance(time.Minute)
	q := newRoomQueue(10)
	q.setInFlight("held")
	q.setInFlight("dropped") // held until the drop below
	p, err := poller.NewWithQueue(st, q, poller.Config{Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	pollOnce(t, p) // the first claim takes this node's rows: nothing counted yet
	if req := st.lastClaim(t); req.SkipOwn {
		t.Fatal("first claim skipped this node's rows")
	}
	pollOnce(t, p)
	if req := st.lastClaim(t); !req.SkipOwn {
		t.Fatal("claim took this node's rows while all were held and none was let go")
	}
	if got := q.ids(); !slices.Equal(got, []string{"backlog"}) {
		t.Fatalf("enqueued %v, want [backlog]", got)
	}
	q.fakeQueue.mu.Lock()
	delete(q.fakeQueue.inFlight, "dropped")
	q.fakeQueue.mu.Unlock()
	q.released.Add(1)
	pollOnce(t, p)
	if req := st.lastClaim(t); req.SkipOwn {
		t.Fatal("claim after a release skipped this node's rows")
	}
	if got := q.ids(); !slices.Equal(got, []string{"backlog", "dropped"}) {
		t.Fatalf("enqueued %v, want [backlog dropped]", got)
	}
}

// ownClaims returns the claims s saw that took this node's rows.
func (s *spyStore) ownClaims() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.claims {
		if !c.SkipOwn {
			n++
		}
	}
	return n
}

// A claim of this node's rows that filled its batch may leave more of
// them behind it (a burst the hot queue dropped, counted as let go
// before that claim): once the other nodes' rows run out, the same poll
// claims this node's rows again, past every row held here. The claims
// left them out as if all were held, until the dispatcher held nothing.
// Events held on timers (retries, delayed events) have rows that are not
// due, which no claim reads: the claim past the held rows does not count
// them, or each would let it take one new row more than its batch (the
// second poll took d3..d8, 6 rows with a batch of 2, beside 10 timers).
func TestOwnRowsLeftBehindAFullClaimAreClaimedPastTheHeld(t *testing.T) {
	for _, timers := range []int{0, 10} {
		clock := testsupport.NewClock(testsupport.Epoch)
		st := &spyStore{Store: memstore.New(clock.Now)}
		lease := core.Lease{Owner: queueOwner, Until: testsupport.Epoch.Add(time.Hour)}
		for _, id := range []string{"h1", "h2", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"} { // oldest first
			insertLeased(t, st.Store, id, lease)
			clock.Advance(time.Second)
		}
		clock.Advance(time.Minute)
		q := &timerQueue{roomQueue: newRoomQueue(100), timers: timers}
		q.setInFlight("h1") // held here (hot queue); d1..d8 were dropped
		q.setInFlight("h2")
		for i := range timers {
			q.setInFlight(fmt.Sprintf("t%d", i)) // on timers: their rows are not due
		}
		p, err := poller.NewWithQueue(st, q, poller.Config{BatchSize: 2, Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
		if err != nil {
			t.Fatal(err)
		}
		pollOnce(t, p) // 2 + 2 held: h1, h2 (held), d1, d2
		if got := q.ids(); !slices.Equal(got, []string{"d1", "d2"}) {
			t.Fatalf("%d timers: first claim enqueued %v, want [d1 d2]", timers, got)
		}
		pollOnce(t, p) // no other rows: this node's, past the 4 held (not the timers'): 2 new
		if got := q.ids(); !slices.Equal(got, []string{"d1", "d2", "d3", "d4"}) {
			t.Fatalf("%d timers: second poll enqueued %v, want [d1 d2 d3 d4]", timers, got)
		}
	}
}

// timerQueue is a roomQueue some of whose held events wait on timers
// (handoff.TimerReporter).
type timerQueue struct {
	*roomQueue
	timers int
}

func (q *timerQueue) OnTimers() int { return q.timers }

// A claim past the held rows that is full and finds nothing new (rows
// held that the count missed) is not repeated poll after poll: this
// node's rows are read again once it lets an event go.
func TestClaimPastTheHeldFindingNothingNewIsNotRepeated(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := &spyStore{Store: memstore.New(clock.Now)}
	lease := core.Lease{Owner: queueOwner, Until: testsupport.Epoch.Add(time.Hour)}
	for _, id := range []string{"h1", "h2", "h3", "h4"} {
		insertLeased(t, st.Store, id, lease)
		clock.Advance(time.Second)
	}
	clock.Advance(time.Minute)
	q := &undercountQueue{newRoomQueue(10)}
	for _, id := range []string{"h1", "h2", "h3", "h4"} {
		q.setInFlight(id)
	}
	p, err := poller.NewWithQueue(st, q, poller.Config{BatchSize: 2, Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	pollOnce(t, p) // 2 + 1 "held": h1..h3, all held, full
	pollOnce(t, p) // other rows: none; past the held: h1..h3 again, full, nothing new
	before := st.ownClaims()
	for range 3 {
		pollOnce(t, p)
	}
	if n := st.ownClaims() - before; n != 0 {
		t.Fatalf("%d more claims of this node's rows, want none until an event is let go", n)
	}
	if got := q.ids(); len(got) != 0 {
		t.Fatalf("enqueued %v, want nothing (all held)", got)
	}
}

// undercountQueue is a roomQueue that says it holds one event whatever
// it holds.
type undercountQueue struct{ *roomQueue }

func (q *undercountQueue) Held() int { return 1 }
