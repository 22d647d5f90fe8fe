package poller_test

import (
	"context"
	"errors"
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

// spyStore records what the poller asks of the store.
type spyStore struct {
	*memstore.Store
	mu         sync.Mutex
	claims     []core.ClaimRequest
	reapLimits []int
}

func (s *spyStore) ClaimDue(ctx context.Context, req core.ClaimRequest) ([]core.Record, error) {
	s.mu.Lock()
	s.claims = append(s.claims, req)
	s.mu.Unlock()
	return s.Store.ClaimDue(ctx, req)
}

func (s *spyStore) ReapExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	s.mu.Lock()
	s.reapLimits = append(s.reapLimits, limit)
	s.mu.Unlock()
	return s.Store.ReapExpired(ctx, now, limit)
}

func (s *spyStore) lastClaim(t *testing.T) core.ClaimRequest {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.claims) == 0 {
		t.Fatal("ClaimDue was not called")
	}
	return s.claims[len(s.claims)-1]
}

// countOps makes st's Fail hook count the operations without failing them.
func countOps(st *memstore.Store) func(op string) int64 {
	var mu sync.Mutex
	n := map[string]int64{}
	st.Fail = func(op, _ string) error {
		mu.Lock()
		n[op]++
		mu.Unlock()
		return nil
	}
	return func(op string) int64 {
		mu.Lock()
		defer mu.Unlock()
		return n[op]
	}
}

func TestPollOnceLeasesClaimedRowsToTheQueuesOwner(t *testing.T) {
	e := newPollEnv(10)
	insert(t, e.st, "a")
	insert(t, e.st, "b")
	e.clock.Advance(time.Hour)
	now := e.clock.Now()
	p := e.poller(t, poller.Config{})
	if res := pollOnce(t, p); res.Enqueued != 2 {
		t.Fatalf("PollOnce = %+v, want 2 enqueued", res)
	}
	until := now.Add(queueLease)
	for _, id := range []string{"a", "b"} {
		if r := row(t, e.st, id); r.LockedBy != queueOwner || !r.LockedUntil.Equal(until) || r.Status != core.StatusNew {
			t.Errorf("row %s: %v locked by %q until %v; want NEW, %s until %v", id, r.Status, r.LockedBy, r.LockedUntil, queueOwner, until)
		}
	}
	for _, got := range e.q.entries() {
		if !got.leaseUntil.Equal(until) {
			t.Errorf("EnqueueCold(%s) got lease end %v, want the claim's %v", got.id, got.leaseUntil, until)
		}
	}
}

func TestPollOnceRespectsLeasesOfOtherNodes(t *testing.T) {
	e := newPollEnv(10)
	t0 := e.clock.Now()
	s := time.Second
	e.clock.Advance(time.Hour)
	now := e.clock.Now()
	put := func(id string, avail time.Duration, owner string, until time.Time) {
		r := record(id, core.StatusNew, t0.Add(avail), t0)
		r.LockedBy, r.LockedUntil = owner, until
		e.st.Put(r)
	}
	put("free", 0, "", time.Time{})
	put("other-live", 1*s, "node-b", now.Add(time.Second))
	put("other-expired", 2*s, "node-b", now.Add(-time.Nanosecond))
	// This node's own row whose hot delivery was dropped: its lease is
	// live, and it is re-taken at once.
	put("mine-live", 3*s, queueOwner, now.Add(time.Hour))

	p := e.poller(t, poller.Config{})
	res := pollOnce(t, p)
	if want := (poller.Result{Read: 3, Enqueued: 3}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v", res, want)
	}
	if got, want := e.q.ids(), []string{"free", "other-expired", "mine-live"}; !slices.Equal(got, want) {
		t.Fatalf("enqueued %v, want %v", got, want)
	}
	for _, id := range []string{"free", "other-expired", "mine-live"} {
		if r := row(t, e.st, id); r.LockedBy != queueOwner || !r.LockedUntil.Equal(now.Add(queueLease)) {
			t.Errorf("row %s locked by %q until %v; want %s until %v", id, r.LockedBy, r.LockedUntil, queueOwner, now.Add(queueLease))
		}
	}
	if r := row(t, e.st, "other-live"); r.LockedBy != "node-b" || !r.LockedUntil.Equal(now.Add(time.Second)) {
		t.Errorf("other-live: locked by %q until %v; the live lease of node-b was taken", r.LockedBy, r.LockedUntil)
	}

	// Once node-b's lease expired, the row is this node's to deliver.
	e.clock.Advance(time.Second + time.Nanosecond)
	res = pollOnce(t, p)
	if res.Enqueued != 1 || e.q.ids()[3] != "other-live" {
		t.Fatalf("PollOnce after node-b's lease expired = %+v, enqueued %v; want other-live", res, e.q.ids())
	}
	if r := row(t, e.st, "other-live"); r.LockedBy != queueOwner {
		t.Errorf("other-live: locked by %q after the take-over, want %s", r.LockedBy, queueOwner)
	}
}

func TestPollOnceClaimRequest(t *testing.T) {
	for _, tc := range []struct {
		name             string
		batch, room      int
		skipRecent       time.Duration
		wantLimit        int
		wantSkipRecent   time.Duration
		configSkipRecent time.Duration
	}{
		{name: "room below batch", batch: 5, room: 3, wantLimit: 3, wantSkipRecent: poller.DefaultSkipRecent},
		{name: "batch below room", batch: 5, room: 10, wantLimit: 5, wantSkipRecent: poller.DefaultSkipRecent},
		{name: "skip nothing", batch: 7, room: 7, wantLimit: 7, configSkipRecent: -1, wantSkipRecent: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testsupport.NewClock(testsupport.Epoch)
			st := &spyStore{Store: memstore.New(clock.Now)}
			p, err := poller.NewWithQueue(st, newFakeQueue(tc.room), poller.Config{
				BatchSize: tc.batch, SkipRecent: tc.configSkipRecent, Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			pollOnce(t, p)
			req := st.lastClaim(t)
			now := clock.Now()
			want := core.ClaimRequest{Owner: queueOwner, Now: now, LeaseUntil: now.Add(queueLease), SkipRecent: tc.wantSkipRecent, Limit: tc.wantLimit}
			if req != want {
				t.Errorf("ClaimDue(%+v), want %+v", req, want)
			}
		})
	}
}

func TestReapOnceReleasesExpiredLeasesInBatches(t *testing.T) {
	e := newPollEnv(10)
	t0 := e.clock.Now()
	e.clock.Advance(time.Hour)
	now := e.clock.Now()
	const expired = 250
	for i := range expired {
		status := core.StatusNew
		if i%2 == 1 {
			status = core.StatusRetry
		}
		r := record(fmt.Sprintf("x%03d", i), status, t0, t0)
		r.LockedBy, r.LockedUntil = "crashed-node", now.Add(-time.Minute)
		e.st.Put(r)
	}
	live := record("live", core.StatusNew, t0, t0)
	live.LockedBy, live.LockedUntil = "node-b", now.Add(time.Minute)
	e.st.Put(live)
	dead := record("dead", core.StatusDead, t0, t0)
	dead.LockedBy, dead.LockedUntil = "crashed-node", now.Add(-time.Minute)
	e.st.Put(dead)
	reaps := countOps(e.st)

	p := e.poller(t, poller.Config{ReapBatch: 100})
	n, err := p.ReapOnce(context.Background())
	if err != nil || n != expired {
		t.Fatalf("ReapOnce = %d, %v; want %d, nil", n, err, expired)
	}
	if got := reaps("reap"); got != 3 {
		t.Errorf("%d reap statements for %d leases with ReapBatch 100, want 3", got, expired)
	}
	for i := range expired {
		id := fmt.Sprintf("x%03d", i)
		if r := row(t, e.st, id); r.LockedBy != "" || !r.LockedUntil.IsZero() {
			t.Fatalf("row %s still locked by %q until %v", id, r.LockedBy, r.LockedUntil)
		}
	}
	if r := row(t, e.st, "live"); r.LockedBy != "node-b" {
		t.Errorf("a live lease was reaped")
	}
	if r := row(t, e.st, "dead"); r.LockedBy != "crashed-node" {
		t.Errorf("a DEAD row's lease was reaped (only NEW/RETRY rows are)")
	}
	if got, calls := e.metrics.Reaped.Load(), e.metrics.ReapCalls.Load(); got != expired || calls != 1 {
		t.Errorf("LeasesReaped: %d in %d calls, want %d in 1", got, calls, expired)
	}
	if l := e.logs.Lines("level=INFO", "released expired leases", fmt.Sprintf("events=%d", expired)); len(l) != 1 {
		t.Errorf("want one INFO line reporting %d released leases:\n%s", expired, e.logs)
	}

	// Nothing left: one statement, no signal.
	if n, err := p.ReapOnce(context.Background()); n != 0 || err != nil {
		t.Errorf("second ReapOnce = %d, %v; want 0, nil", n, err)
	}
	if got := reaps("reap"); got != 4 {
		t.Errorf("%d reap statements in total, want 4", got)
	}
	if calls := e.metrics.ReapCalls.Load(); calls != 1 {
		t.Errorf("LeasesReaped called %d times, want 1 (not for 0)", calls)
	}
}

func TestReapOnceIsBoundedPerCall(t *testing.T) {
	e := newPollEnv(10)
	t0 := e.clock.Now()
	e.clock.Advance(time.Hour)
	const expired = 1050
	for i := range expired {
		r := record(fmt.Sprintf("x%04d", i), core.StatusNew, t0, t0)
		r.LockedBy, r.LockedUntil = "crashed-node", t0
		e.st.Put(r)
	}
	p := e.poller(t, poller.Config{ReapBatch: 100})
	n1, err := p.ReapOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n1 >= expired || n1%100 != 0 || n1 == 0 {
		t.Fatalf("first ReapOnce released %d of %d; want whole batches, not everything in one call", n1, expired)
	}
	total := n1
	for range expired / 100 {
		n, err := p.ReapOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if total += n; n == 0 {
			break
		}
	}
	if total != expired {
		t.Fatalf("ReapOnce calls released %d leases in total, want %d", total, expired)
	}
}

func TestReapOnceReportsLeasesReleasedBeforeAFailure(t *testing.T) {
	e := newPollEnv(10)
	t0 := e.clock.Now()
	e.clock.Advance(time.Hour)
	for i := range 250 {
		r := record(fmt.Sprintf("x%03d", i), core.StatusNew, t0, t0)
		r.LockedBy, r.LockedUntil = "crashed-node", t0
		e.st.Put(r)
	}
	errDown := errors.New("connection lost")
	var calls atomic.Int32
	e.st.Fail = func(op, _ string) error {
		if op == "reap" && calls.Add(1) == 2 {
			return errDown
		}
		return nil
	}
	p := e.poller(t, poller.Config{ReapBatch: 100})
	n, err := p.ReapOnce(context.Background())
	if !errors.Is(err, errDown) || n != 100 {
		t.Fatalf("ReapOnce = %d, %v; want 100 and the store's error", n, err)
	}
	if got := e.metrics.Reaped.Load(); got != 100 {
		t.Errorf("LeasesReaped = %d, want the 100 released before the failure", got)
	}
}

func TestReapBatchDefault(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := &spyStore{Store: memstore.New(clock.Now)}
	p, err := poller.NewWithQueue(st, newFakeQueue(1), poller.Config{Now: clock.Now, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReapOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Equal(st.reapLimits, []int{poller.DefaultReapBatch}) || poller.DefaultReapBatch != 100 {
		t.Errorf("ReapExpired limits %v with ReapBatch 0, want [100] (the default)", st.reapLimits)
	}
	if poller.DefaultReapInterval != 30*time.Second {
		t.Errorf("DefaultReapInterval = %v, want 30s", poller.DefaultReapInterval)
	}
}

func TestBackgroundLoopReapsAtReapInterval(t *testing.T) {
	const reapInterval = 50 * time.Millisecond
	e := newPollEnv(10)
	t0 := e.clock.Now()
	r := record("x", core.StatusRetry, t0.Add(24*time.Hour), t0) // not due: only the reaper touches it
	r.LockedBy, r.LockedUntil = "crashed-node", t0
	e.st.Put(r)
	e.clock.Advance(time.Hour)

	var claims atomic.Int64
	firstReap := make(chan time.Time, 1)
	e.st.Fail = func(op, _ string) error {
		switch op {
		case "claim":
			claims.Add(1)
		case "reap":
			select {
			case firstReap <- time.Now():
			default:
			}
		}
		return nil
	}
	p := e.poller(t, poller.Config{Interval: 5 * time.Millisecond, ReapInterval: reapInterval})
	started := time.Now()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	select {
	case at = <-firstReap:
	case <-time.After(waitTimeout):
		t.Fatal("the background loop never reaped")
	}
	if gap := at.Sub(started); gap < reapInterval {
		t.Errorf("first reap %v after Start, before the ReapInterval of %v", gap, reapInterval)
	}
	waitFor(t, "the expired lease to be released", func() bool {
		got, _ := e.st.Get("x")
		return got.LockedBy == "" && e.metrics.Reaped.Load() == 1
	}, nil)
	if claims.Load() < 2 {
		t.Errorf("%d poll cycles before the first reap at Interval 5ms and ReapInterval 50ms; want several", claims.Load())
	}
}

// Reaping keeps its own schedule: with a ReapInterval shorter than
// Interval, expired leases are released every ReapInterval, between the
// polls, which stay at Interval (they were released only at the next
// poll, after Interval).
func TestReapIntervalShorterThanInterval(t *testing.T) {
	e := newPollEnv(10)
	t0 := e.clock.Now()
	r := record("x", core.StatusRetry, t0.Add(24*time.Hour), t0) // not due: only the reaper touches it
	r.LockedBy, r.LockedUntil = "crashed-node", t0
	e.st.Put(r)
	e.clock.Advance(time.Hour)
	claims, reaps := countClaimsAndReaps(e)
	p := e.poller(t, poller.Config{Interval: time.Hour, ReapInterval: 10 * time.Millisecond})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the expired lease released before the next poll", func() bool {
		got, _ := e.st.Get("x")
		return got.LockedBy == "" && e.metrics.Reaped.Load() == 1
	}, nil)
	waitFor(t, "reaping again at ReapInterval", func() bool { return reaps.Load() >= 3 }, nil)
	if n := claims.Load(); n != 1 {
		t.Errorf("%d claims within the first Interval of an hour, want 1 (the first poll): reaping brought polls", n)
	}
}

func TestBackgroundLoopWithoutReaping(t *testing.T) {
	e := newPollEnv(10)
	claims, reaps := countClaimsAndReaps(e)
	p := e.poller(t, poller.Config{Interval: time.Millisecond, ReapInterval: -1})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "20 poll cycles", func() bool { return claims.Load() >= 20 }, nil)
	if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
		t.Fatal(err)
	}
	if n := reaps.Load(); n != 0 {
		t.Errorf("%d reap statements with ReapInterval < 0, want 0", n)
	}
}

// instantQueue is a cold queue of capacity 1 whose worker delivers each
// event at once: it always has room for one more.
type instantQueue struct {
	st    *memstore.Store
	mu    sync.Mutex
	times []time.Time
	got   chan struct{}
}

func (q *instantQueue) ClaimLease(now time.Time) core.Lease {
	return core.Lease{Owner: queueOwner, Until: now.Add(queueLease)}
}

func (q *instantQueue) ClaimMark() uint64 { return 0 }

func (q *instantQueue) EnqueueCold(env core.Envelope, _ int, _, _ time.Time, _ uint64, _ int64, _ bool) bool {
	// The time first: a test that sees the row DONE finds its time.
	q.mu.Lock()
	q.times = append(q.times, time.Now())
	q.mu.Unlock()
	if n, err := q.st.MarkDone(context.Background(), queueOwner, []string{env.ID()}); n != 1 || err != nil {
		panic(fmt.Sprintf("MarkDone(%s) = %d, %v", env.ID(), n, err))
	}
	select {
	case q.got <- struct{}{}:
	default:
	}
	return true
}

func (q *instantQueue) ColdRoom() int                { return 1 }
func (q *instantQueue) InFlight(string) bool         { return false }
func (q *instantQueue) QueueDepths() (hot, cold int) { return 0, 0 }
func (q *instantQueue) Held() int                    { return 0 }

// A cycle that claimed as many rows as the cold queue had room for (fewer
// than BatchSize) is a full batch: the next cycle follows after
// BacklogInterval, not Interval.
func TestBacklogDrainsWhenTheClaimIsLimitedByColdRoom(t *testing.T) {
	const interval = 500 * time.Millisecond
	clock := testsupport.NewClock(testsupport.Epoch)
	st := memstore.New(clock.Now)
	for _, id := range []string{"a", "b", "c"} {
		insert(t, st, id)
	}
	clock.Advance(time.Hour)
	q := &instantQueue{st: st, got: make(chan struct{}, 1)}
	logs := &testsupport.LogBuffer{}
	p, err := poller.NewWithQueue(st, q, poller.Config{
		Interval: interval, BacklogInterval: time.Millisecond, BatchSize: 100, Now: clock.Now, Logger: logs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
			t.Errorf("Stop = %v", err)
		}
	})
	waitFor(t, "the three rows to be delivered", func() bool { return st.Count(core.StatusDone) == 3 }, q.got)
	q.mu.Lock()
	defer q.mu.Unlock()
	if gap := q.times[2].Sub(q.times[0]); gap >= interval/2 {
		t.Errorf("the backlog of 3 rows (1 per cycle) took %v after the first: cycles waited Interval, not BacklogInterval", gap)
	}
}

// countClaimsAndReaps counts the claims and reaping statements of e's
// store.
func countClaimsAndReaps(e *pollEnv) (claims, reaps *atomic.Int64) {
	claims, reaps = new(atomic.Int64), new(atomic.Int64)
	e.st.Fail = func(op, _ string) error {
		switch op {
		case "claim":
			claims.Add(1)
		case "reap":
			reaps.Add(1)
		}
		return nil
	}
	return claims, reaps
}
