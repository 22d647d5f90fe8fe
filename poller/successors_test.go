package poller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// successorStore is a memstore that claims by position
// (core.SuccessorClaimer): the event after (key, seq) is the row with id
// key-(seq+1), claimed when it is NEW and unowned. It counts the full
// claims.
type successorStore struct {
	*memstore.Store
	fullClaims atomic.Int64
	mu         sync.Mutex
	next       [][]core.OrderPos // ClaimNext's calls
	err        error             // ClaimNext's error, if any
	locked     int               // positions ClaimNext reports locked before it claims
}

func newSuccessorStore(now func() time.Time) *successorStore {
	return &successorStore{Store: memstore.New(now)}
}

func (s *successorStore) ClaimDue(ctx context.Context, req core.ClaimRequest) ([]core.Record, error) {
	s.fullClaims.Add(1)
	return s.Store.ClaimDue(ctx, req)
}

func (s *successorStore) ClaimNext(_ context.Context, req core.NextRequest) (core.NextResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = append(s.next, slices.Clone(req.After))
	if s.err != nil {
		return core.NextResult{}, s.err
	}
	var res core.NextResult
	for _, p := range req.After {
		if s.locked > 0 {
			s.locked--
			res.Locked = append(res.Locked, p)
			continue
		}
		r, ok := s.Get(fmt.Sprintf("%s-%d", p.Key, p.Seq+1))
		if !ok || r.Status != core.StatusNew || r.LockedBy != "" {
			continue
		}
		r.LockedBy, r.LockedUntil = req.Owner, req.LeaseUntil
		r.OrderKey, r.OrderSeq = p.Key, p.Seq+1
		s.Put(r)
		res.Claimed = append(res.Claimed, r)
	}
	return res, nil
}

func (*successorStore) WaitingAfter(context.Context, time.Time, []string) ([]core.OrderPos, error) {
	return nil, nil // the dispatcher's question; the poller never asks it
}

func (s *successorStore) nextCalls() [][]core.OrderPos {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.next)
}

func (s *successorStore) failNext(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// startedPoller starts a poller of st into q whose polls come an hour
// apart and take only rows older than a second (the rows of these tests
// are younger): once the poll at Start is done, only a woken poll or a
// claim by position takes a row.
func startedPoller(t *testing.T, st poller.Store, q handoff.Cold, clock *testsupport.Clock, fullClaims func() int64) *poller.Poller {
	t.Helper()
	p, err := poller.NewWithQueue(st, q, poller.Config{Interval: time.Hour, BacklogInterval: time.Hour, BatchSize: 2,
		SkipRecent: time.Second, Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	if fullClaims != nil {
		waitFor(t, "the poll at Start", func() bool { return fullClaims() == 1 }, nil)
	}
	return p
}

// After ordered events finished, the poller claims the event after each
// by its position, at once and without a full claim: the other due rows
// wait for the next poll. The claimed events carry their positions to
// the queue.
func TestFinishedOrderedEventsHaveTheirSuccessorsClaimed(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := newSuccessorStore(clock.Now)
	for _, id := range []string{"k-2", "k-3", "j-3", "other"} {
		insert(t, st.Store, id)
	}
	q := newFakeQueue(10)
	p := startedPoller(t, st, q, clock, st.fullClaims.Load)
	p.ClaimAfter("", []core.OrderPos{{Key: "k", Seq: 1}, {Key: "j", Seq: 2}, {Key: "none", Seq: 4}})
	waitFor(t, "the successors", func() bool { return len(q.ids()) == 2 }, q.signal)
	got := q.entries()
	slices.SortFunc(got, func(a, b enqueued) int { return strings.Compare(a.id, b.id) })
	if got[0].id != "j-3" || got[0].seq != 3 || got[1].id != "k-2" || got[1].seq != 2 {
		t.Errorf("enqueued %+v, want j-3 at 3 and k-2 at 2", got)
	}
	for _, e := range got {
		if r := row(t, st.Store, e.id); r.LockedBy != queueOwner || !e.leaseUntil.Equal(clock.Now().Add(queueLease)) {
			t.Errorf("%s: leased to %q, enqueued with lease end %v", e.id, r.LockedBy, e.leaseUntil)
		}
	}
	if n := st.fullClaims.Load(); n != 1 {
		t.Errorf("%d full claims, want 1 (the poll at Start only)", n)
	}
	// k-3 follows k-2 once that one finished.
	p.ClaimAfter("", []core.OrderPos{{Key: "k", Seq: 2}})
	waitFor(t, "k-3", func() bool { return slices.Contains(q.ids(), "k-3") }, q.signal)
	if n := st.fullClaims.Load(); n != 1 || slices.Contains(q.ids(), "other") {
		t.Errorf("%d full claims, enqueued %v: want 1 and no other", n, q.ids())
	}
}

// Without positions (events of the hot path) or a store that claims by
// position, a finished ordered event wakes a full claim, which ignores
// SkipRecent.
func TestFinishedOrderedEventsWithoutPositionsWakeAFullClaim(t *testing.T) {
	t.Run("nil positions", func(t *testing.T) {
		clock := testsupport.NewClock(testsupport.Epoch)
		st := newSuccessorStore(clock.Now)
		insert(t, st.Store, "k-2")
		q := newFakeQueue(10)
		p := startedPoller(t, st, q, clock, st.fullClaims.Load)
		p.ClaimAfter("", nil)
		waitFor(t, "the full claim", func() bool { return len(q.ids()) == 1 }, q.signal)
		if n := st.fullClaims.Load(); n != 2 || len(st.nextCalls()) != 0 {
			t.Errorf("%d full claims and %d claims by position, want 2 and 0", n, len(st.nextCalls()))
		}
	})
	t.Run("store without SuccessorClaimer", func(t *testing.T) {
		clock := testsupport.NewClock(testsupport.Epoch)
		st := memstore.New(clock.Now)
		insert(t, st, "k-2")
		q := newFakeQueue(10)
		p := startedPoller(t, st, q, clock, nil)
		p.ClaimAfter("", []core.OrderPos{{Key: "k", Seq: 1}})
		waitFor(t, "the full claim", func() bool { return len(q.ids()) == 1 }, q.signal)
	})
}

// More positions than maxAfter batches wait for no claim by position:
// the poller forgets them and claims in full, which finds their
// successors too.
func TestTooManyFinishedOrderedEventsBecomeAFullClaim(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := newSuccessorStore(clock.Now)
	insert(t, st.Store, "k-2")
	q := newFakeQueue(10)
	p := startedPoller(t, st, q, clock, st.fullClaims.Load)
	var after []core.OrderPos
	for i := range 9 { // BatchSize 2: more than 4 × 2
		after = append(after, core.OrderPos{Key: fmt.Sprintf("x%d", i), Seq: 1})
	}
	p.ClaimAfter("", after)
	waitFor(t, "the full claim", func() bool { return st.fullClaims.Load() == 2 }, nil)
	waitFor(t, "k-2", func() bool { return len(q.ids()) == 1 }, q.signal)
	if calls := st.nextCalls(); len(calls) != 0 {
		t.Errorf("claims by position %v, want none", calls)
	}
}

// A failing claim by position falls back to a full claim.
func TestFailedClaimByPositionFallsBackToAFullClaim(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := newSuccessorStore(clock.Now)
	st.failNext(errors.New("connection reset"))
	insert(t, st.Store, "k-2")
	q := newFakeQueue(10)
	p := startedPoller(t, st, q, clock, st.fullClaims.Load)
	p.ClaimAfter("", []core.OrderPos{{Key: "k", Seq: 1}})
	waitFor(t, "the full claim", func() bool { return len(q.ids()) == 1 }, q.signal)
	if n, calls := st.fullClaims.Load(), st.nextCalls(); n != 2 || len(calls) != 1 {
		t.Errorf("%d full claims after %d claims by position, want 2 after 1", n, len(calls))
	}
}

// With the cold queue full, positions wait for its room notice, then are
// claimed.
func TestFinishedOrderedEventsWaitForRoom(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := newSuccessorStore(clock.Now)
	insert(t, st.Store, "k-2")
	q := newRoomQueue(0)
	p := startedPoller(t, st, q, clock, nil)
	// The poll at Start found the queue full and armed a notice.
	recv(t, q.armed, "the notice of the poll at Start")
	p.ClaimAfter("", []core.OrderPos{{Key: "k", Seq: 1}})
	if calls := st.nextCalls(); len(calls) != 0 {
		t.Fatalf("claims by position with a full queue: %v", calls)
	}
	q.makeRoom(5)
	waitFor(t, "k-2 once the queue has room", func() bool { return len(q.ids()) == 1 }, q.signal)
	if calls := st.nextCalls(); len(calls) != 1 {
		t.Errorf("claims by position %v, want one", calls)
	}
}

// A position whose next event was locked by another transaction is asked
// for again shortly (after waits that double while it stays locked),
// without a full claim, and its event claimed once no longer locked.
func TestLockedSuccessorsAreAskedForAgain(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := newSuccessorStore(clock.Now)
	st.locked = 3
	insert(t, st.Store, "k-2")
	q := newFakeQueue(10)
	p := startedPoller(t, st, q, clock, st.fullClaims.Load)
	p.ClaimAfter("", []core.OrderPos{{Key: "k", Seq: 1}})
	waitFor(t, "k-2 once no longer locked", func() bool { return len(q.ids()) == 1 }, q.signal)
	if n, calls := st.fullClaims.Load(), st.nextCalls(); n != 1 || len(calls) != 4 {
		t.Errorf("%d full claims and claims by position %v, want 1 and four of [{k 1}]", n, calls)
	}
}

// With several stores, positions go to the store they came from: only
// its claim by position runs, and its queue gets the event.
func TestFinishedOrderedEventsOfOneStoreOfSeveral(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	stA, stB := newSuccessorStore(clock.Now), newSuccessorStore(clock.Now)
	insert(t, stA.Store, "k-2")
	insert(t, stB.Store, "k-2")
	qA, qB := newFakeQueue(10), newFakeQueue(10)
	p, err := poller.NewMulti(poller.Config{Interval: time.Hour, BacklogInterval: time.Hour, SkipRecent: time.Second,
		Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddQueue("a", stA, qA); err != nil {
		t.Fatal(err)
	}
	if err := p.AddQueue("b", stB, qB); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	waitFor(t, "the polls at Start", func() bool { return stA.fullClaims.Load() == 1 && stB.fullClaims.Load() == 1 }, nil)
	p.ClaimAfter("b", []core.OrderPos{{Key: "k", Seq: 1}})
	waitFor(t, "k-2 of store b", func() bool { return len(qB.ids()) == 1 }, qB.signal)
	if calls := stA.nextCalls(); len(calls) != 0 || len(qA.ids()) != 0 {
		t.Errorf("store a: claims by position %v, enqueued %v; want none", calls, qA.ids())
	}
	p.Remove("b")
	p.ClaimAfter("b", []core.OrderPos{{Key: "k", Seq: 2}}) // a removed store: ignored
	p.ClaimAfter("a", []core.OrderPos{{Key: "k", Seq: 1}})
	waitFor(t, "k-2 of store a", func() bool { return len(qA.ids()) == 1 }, qA.signal)
	if calls := stB.nextCalls(); len(calls) != 1 {
		t.Errorf("store b: claims by position %v after its removal, want the one before", calls)
	}
}
