package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// insertLeased stores env in its own transaction, owned by lease.
func insertLeased(t *testing.T, st *jdbcstore.Store, env core.Envelope, lease core.Lease) {
	t.Helper()
	ctx := t.Context()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := st.Insert(ctx, tx, env, lease); err != nil {
		_ = tx.Rollback()
		t.Fatalf("insert %s: %v", env.ID(), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit %s: %v", env.ID(), err)
	}
}

func ids(recs []core.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func claimedIDs(t *testing.T, what string, got []core.Record, want ...string) {
	t.Helper()
	sameIDs(t, what, ids(got), want)
}

// Every status write is fenced on the owner: a node that does not hold the
// lease changes nothing.
func (s *suite) testFence(t *testing.T) {
	t.Run("StaleOwnerChangesNothing", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		a := core.Lease{Owner: "node-a", Until: t0.Add(time.Minute)}
		insertLeased(t, st, jsonEvent(t, "f-1"), a)

		n, err := st.MarkDone(ctx, "node-b", []string{"f-1"})
		if err != nil || n != 0 {
			t.Fatalf("MarkDone by stale owner: n=%d err=%v, want 0, nil", n, err)
		}
		ok, err := st.MarkRetry(ctx, "node-b", "f-1", t0.Add(time.Second), t0.Add(time.Hour), "x")
		mark(t, "MarkRetry by stale owner", false, ok, err)
		ok, err = st.MarkDead(ctx, "node-b", "f-1", "x")
		mark(t, "MarkDead by stale owner", false, ok, err)
		rec := get(t, st, "f-1")
		if rec.Status != core.StatusNew || rec.Attempts != 0 || rec.LockedBy != "node-a" || rec.LastError != "" {
			t.Fatalf("row changed by a stale owner: %+v", rec)
		}
		sameTime(t, "LockedUntil", rec.LockedUntil, micro(a.Until))

		n, err = st.MarkDone(ctx, "node-a", []string{"f-1"})
		if err != nil || n != 1 {
			t.Fatalf("MarkDone by the owner: n=%d err=%v", n, err)
		}
		rec = get(t, st, "f-1")
		if rec.Status != core.StatusDone || rec.LockedBy != "" || !rec.LockedUntil.IsZero() {
			t.Fatalf("after owner's MarkDone: status %v locked_by %q until %v", rec.Status, rec.LockedBy, rec.LockedUntil)
		}
	})

	t.Run("UnownedRowMustBeClaimedFirst", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		insertLeased(t, st, jsonEvent(t, "f-free"), core.Lease{})
		if rec := get(t, st, "f-free"); rec.LockedBy != "" || !rec.LockedUntil.IsZero() {
			t.Fatalf("unowned insert stored lease %q/%v", rec.LockedBy, rec.LockedUntil)
		}
		n, err := st.MarkDone(t.Context(), testOwner, []string{"f-free"})
		if err != nil || n != 0 {
			t.Fatalf("MarkDone of an unclaimed row: n=%d err=%v, want 0", n, err)
		}
	})

	t.Run("MarkDoneBatchCountsOnlyOwnedNotDone", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		ctx := t.Context()
		for _, id := range []string{"b-1", "b-2", "b-3", "b-done"} {
			insert(t, st, jsonEvent(t, id))
		}
		insertLeased(t, st, jsonEvent(t, "b-other"), core.Lease{Owner: "node-b", Until: t0.Add(time.Hour)})
		if ok, err := markDone(ctx, st, "b-done"); !ok || err != nil {
			t.Fatalf("MarkDone b-done: %v %v", ok, err)
		}
		n, err := st.MarkDone(ctx, testOwner, []string{"b-1", "b-2", "b-3", "b-done", "b-other", "b-missing"})
		if err != nil || n != 3 {
			t.Fatalf("batch MarkDone: n=%d err=%v, want 3", n, err)
		}
		for id, want := range map[string]core.Status{"b-1": core.StatusDone, "b-2": core.StatusDone, "b-3": core.StatusDone, "b-other": core.StatusNew} {
			if got := get(t, st, id).Status; got != want {
				t.Errorf("%s: %v, want %v", id, got, want)
			}
		}
		if n, err := st.MarkDone(ctx, testOwner, nil); n != 0 || err != nil {
			t.Fatalf("empty batch: n=%d err=%v", n, err)
		}
	})

	t.Run("RetryKeepsLeaseDeadReleasesIt", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		ctx := t.Context()
		insert(t, st, jsonEvent(t, "r-1"))
		until := t0.Add(90 * time.Second)
		ok, err := st.MarkRetry(ctx, testOwner, "r-1", t0.Add(time.Second), until, "boom")
		mark(t, "MarkRetry", true, ok, err)
		rec := get(t, st, "r-1")
		if rec.LockedBy != testOwner {
			t.Fatalf("MarkRetry released the lease: locked_by %q", rec.LockedBy)
		}
		sameTime(t, "LockedUntil after retry", rec.LockedUntil, micro(until))
		ok, err = st.MarkDead(ctx, testOwner, "r-1", "gave up")
		mark(t, "MarkDead", true, ok, err)
		if rec := get(t, st, "r-1"); rec.LockedBy != "" || !rec.LockedUntil.IsZero() {
			t.Fatalf("MarkDead kept the lease %q/%v", rec.LockedBy, rec.LockedUntil)
		}
	})

	t.Run("BadOwnerRejected", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := t.Context()
		long := string(make([]byte, core.MaxOwnerLen+1))
		for _, owner := range []string{"", long} {
			if _, err := st.MarkDone(ctx, owner, []string{"x"}); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("MarkDone owner len %d: err %v", len(owner), err)
			}
			if _, err := st.MarkRetry(ctx, owner, "x", t0, t0, "m"); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("MarkRetry owner len %d: err %v", len(owner), err)
			}
			if _, err := st.MarkDead(ctx, owner, "x", "m"); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("MarkDead owner len %d: err %v", len(owner), err)
			}
			if _, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: owner, Now: t0, LeaseUntil: t0.Add(time.Second), Limit: 1}); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("ClaimDue owner len %d: err %v", len(owner), err)
			}
		}
	})
}

func (s *suite) testClaim(t *testing.T) {
	t.Run("ClaimsUnownedExpiredAndOwnRows", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		insertLeased(t, st, jsonEvent(t, "c-1-free"), core.Lease{})
		clk.Advance(time.Millisecond)
		insertLeased(t, st, jsonEvent(t, "c-2-other-live"), core.Lease{Owner: "node-b", Until: t0.Add(time.Hour)})
		clk.Advance(time.Millisecond)
		insertLeased(t, st, jsonEvent(t, "c-3-other-expired"), core.Lease{Owner: "node-b", Until: t0.Add(time.Second)})
		clk.Advance(time.Millisecond)
		insertLeased(t, st, jsonEvent(t, "c-4-mine"), core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)})

		now := t0.Add(10 * time.Second)
		lease := now.Add(time.Minute)
		recs, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: "node-a", Now: now, LeaseUntil: lease, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		claimedIDs(t, "claimed", recs, "c-1-free", "c-3-other-expired", "c-4-mine")
		for _, r := range recs {
			if r.LockedBy != "node-a" {
				t.Errorf("%s: returned locked_by %q", r.ID, r.LockedBy)
			}
			sameTime(t, r.ID+" returned LockedUntil", r.LockedUntil, micro(lease))
			if stored := get(t, st, r.ID); stored.LockedBy != "node-a" {
				t.Errorf("%s: stored locked_by %q", r.ID, stored.LockedBy)
			} else {
				sameTime(t, r.ID+" stored LockedUntil", stored.LockedUntil, micro(lease))
			}
			if _, err := r.Envelope(); err != nil {
				t.Errorf("%s: claimed record does not decode: %v", r.ID, err)
			}
		}
		if rec := get(t, st, "c-2-other-live"); rec.LockedBy != "node-b" {
			t.Fatalf("live lease of another node was taken: %q", rec.LockedBy)
		}
		// node-b cannot take node-a's fresh claims.
		recs, err = st.ClaimDue(ctx, core.ClaimRequest{Owner: "node-b", Now: now, LeaseUntil: lease, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		claimedIDs(t, "node-b claims its own live row only", recs, "c-2-other-live")
	})

	t.Run("OrderLimitSkipRecentAndStatus", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		for i := range 5 {
			insert(t, st, jsonEvent(t, fmt.Sprintf("o-%d", i)))
			clk.Advance(time.Second)
		}
		// o-0 DONE, o-1 DEAD, o-2 RETRY due later than o-3/o-4.
		if ok, err := markDone(ctx, st, "o-0"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := st.MarkDead(ctx, testOwner, "o-1", "x"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := st.MarkRetry(ctx, testOwner, "o-2", t0.Add(6*time.Second), t0.Add(time.Hour), "x"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		now := t0.Add(7 * time.Second) // o-4 created at t0+4s
		req := core.ClaimRequest{Owner: testOwner, Now: now, LeaseUntil: now.Add(time.Minute), SkipRecent: 3500 * time.Millisecond, Limit: 10}
		recs, err := st.ClaimDue(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		claimedIDs(t, "skipRecent excludes o-4", recs, "o-3", "o-2")
		req.SkipRecent, req.Limit = 0, 2
		recs, err = st.ClaimDue(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		claimedIDs(t, "limit 2 in due order", recs, "o-3", "o-4")
		req.Now, req.Limit = t0.Add(5*time.Second), 10 // o-2 not due yet
		req.LeaseUntil = req.Now.Add(time.Minute)
		recs, err = st.ClaimDue(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		claimedIDs(t, "future available_at excluded", recs, "o-3", "o-4")
	})

	// A delayed event is claimable as soon as it is due, however recently
	// it was published: SkipRecent leaves only rows due at their creation
	// to the hot path (which holds a delayed event only within
	// RetryCapacity; beyond it the poller alone delivers it, within one
	// interval of its time).
	t.Run("DelayedEventClaimableWhenDueDespiteSkipRecent", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		insert(t, st, jsonEvent(t, "plain"))
		insert(t, st, build(t, core.NewEvent("Delayed").ID("delayed").PayloadJSONString(`{}`).NotBefore(t0.Add(300*time.Millisecond))))
		now := t0.Add(300 * time.Millisecond)
		recs, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: testOwner, Now: now, LeaseUntil: now.Add(time.Minute), SkipRecent: time.Second, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		claimedIDs(t, "the delayed event, due; the plain one, recent, left", recs, "delayed")
		ids, _ := poll(t, st, now, time.Second, 10)
		sameIDs(t, "poll: the delayed event, due", ids, []string{"delayed"})
	})

	// ExtendLeases pushes back the lease end of the owner's NEW and RETRY
	// rows among ids, and of no other row.
	t.Run("ExtendLeasesOnlyOwnPendingRows", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		mine := core.Lease{Owner: "node-a", Until: t0.Add(time.Minute)}
		insertLeased(t, st, jsonEvent(t, "x-new"), mine)
		insertLeased(t, st, jsonEvent(t, "x-retry"), mine)
		insertLeased(t, st, jsonEvent(t, "x-done"), mine)
		insertLeased(t, st, jsonEvent(t, "x-other"), core.Lease{Owner: "node-b", Until: t0.Add(time.Minute)})
		if ok, err := st.MarkRetry(ctx, "node-a", "x-retry", t0.Add(time.Second), t0.Add(time.Minute), "x"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if n, err := st.MarkDone(ctx, "node-a", []string{"x-done"}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		until := t0.Add(time.Hour)
		n, err := st.ExtendLeases(ctx, "node-a", []string{"x-new", "x-retry", "x-done", "x-other", "x-missing"}, until)
		if err != nil || n != 2 {
			t.Fatalf("ExtendLeases = %d, %v; want 2 (the owner's NEW and RETRY rows)", n, err)
		}
		for id, want := range map[string]time.Time{"x-new": until, "x-retry": until, "x-other": t0.Add(time.Minute)} {
			if r := get(t, st, id); !r.LockedUntil.Equal(want.Truncate(time.Microsecond)) {
				t.Errorf("%s: locked_until %v, want %v", id, r.LockedUntil, want)
			}
		}
		if r := get(t, st, "x-done"); r.LockedBy != "" {
			t.Errorf("x-done: leased to %q after ExtendLeases, want DONE and unleased", r.LockedBy)
		}
		if _, err := st.ExtendLeases(ctx, "", []string{"x-new"}, until); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("ExtendLeases without an owner: err = %v, want ErrInvalidConfig", err)
		}
		if n, err := st.ExtendLeases(ctx, "node-a", nil, until); n != 0 || err != nil {
			t.Errorf("ExtendLeases of no ids = %d, %v; want 0, nil", n, err)
		}
	})

	t.Run("BadRequestsRejected", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		for name, req := range map[string]core.ClaimRequest{
			"limit 0":             {Owner: "a", Now: t0, LeaseUntil: t0.Add(time.Second), Limit: 0},
			"negative skipRecent": {Owner: "a", Now: t0, LeaseUntil: t0.Add(time.Second), Limit: 1, SkipRecent: -time.Second},
			"lease not after now": {Owner: "a", Now: t0, LeaseUntil: t0, Limit: 1},
			"lease before now":    {Owner: "a", Now: t0, LeaseUntil: t0.Add(-time.Second), Limit: 1},
		} {
			if _, err := st.ClaimDue(t.Context(), req); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
			}
		}
		if _, err := st.ReapExpired(t.Context(), t0, 0); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("ReapExpired limit 0: err %v", err)
		}
	})

	t.Run("ConcurrentClaimersGetDisjointRows", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		const rows, claimers = 60, 4
		for i := range rows {
			insertLeased(t, st, jsonEvent(t, fmt.Sprintf("cc-%02d", i)), core.Lease{})
		}
		now := t0.Add(time.Minute)
		var (
			mu    sync.Mutex
			owner = map[string]string{}
			wg    sync.WaitGroup
			errs  = make(chan error, claimers)
		)
		for c := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := fmt.Sprintf("claimer-%d", c)
				for {
					recs, err := st.ClaimDue(t.Context(), core.ClaimRequest{Owner: me, Now: now, LeaseUntil: now.Add(time.Hour), Limit: 7})
					if err != nil {
						errs <- err
						return
					}
					if len(recs) == 0 {
						return
					}
					mu.Lock()
					for _, r := range recs {
						if prev, dup := owner[r.ID]; dup && prev != me {
							errs <- fmt.Errorf("%s claimed by %s and %s", r.ID, prev, me)
						}
						owner[r.ID] = me
					}
					mu.Unlock()
					// Our own rows stay claimable for us: finish them so the loop ends.
					claimed := ids(recs)
					if n, err := st.MarkDone(t.Context(), me, claimed); err != nil || n != int64(len(claimed)) {
						errs <- fmt.Errorf("%s MarkDone %d of %d: %v", me, n, len(claimed), err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(owner) != rows {
			t.Fatalf("%d rows claimed, want %d", len(owner), rows)
		}
		counts, err := st.CountByStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if counts[core.StatusDone] != rows {
			t.Fatalf("DONE %d, want %d", counts[core.StatusDone], rows)
		}
	})
}

func (s *suite) testReap(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	st := s.newStore(t, clk, jdbcstore.Config{})
	ctx := t.Context()
	expired := core.Lease{Owner: "node-gone", Until: t0.Add(time.Second)}
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("x-%d", i)
		insertLeased(t, st, jsonEvent(t, id), expired)
		want = append(want, id)
	}
	insertLeased(t, st, jsonEvent(t, "live"), core.Lease{Owner: "node-b", Until: t0.Add(time.Hour)})
	insertLeased(t, st, jsonEvent(t, "done"), core.Lease{Owner: "node-gone", Until: t0.Add(time.Second)})
	if n, err := st.MarkDone(ctx, "node-gone", []string{"done"}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	now := t0.Add(time.Minute)
	n, err := st.ReapExpired(ctx, now, 3)
	if err != nil || n != 3 {
		t.Fatalf("first reap: n=%d err=%v, want 3 (the limit)", n, err)
	}
	n, err = st.ReapExpired(ctx, now, 3)
	if err != nil || n != 2 {
		t.Fatalf("second reap: n=%d err=%v, want 2", n, err)
	}
	n, err = st.ReapExpired(ctx, now, 3)
	if err != nil || n != 0 {
		t.Fatalf("third reap: n=%d err=%v, want 0", n, err)
	}
	var released []string
	for _, id := range want {
		if rec := get(t, st, id); rec.LockedBy == "" && rec.LockedUntil.IsZero() {
			released = append(released, id)
		}
	}
	sort.Strings(released)
	if !slices.Equal(released, want) {
		t.Fatalf("released %v, want %v", released, want)
	}
	if rec := get(t, st, "live"); rec.LockedBy != "node-b" {
		t.Fatalf("a live lease was reaped")
	}
}

// An event with NotBefore is stored with available_at = NotBefore and is
// neither polled nor claimed before it.
func (s *suite) testNotBefore(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	st := s.newStore(t, clk, jdbcstore.Config{})
	ctx := t.Context()
	due := t0.Add(30 * time.Second)
	insert(t, st, build(t, core.NewEvent("Later").ID("nb-later").NotBefore(due).PayloadJSONString(`{}`)))
	insert(t, st, build(t, core.NewEvent("Past").ID("nb-past").NotBefore(t0.Add(-time.Hour)).PayloadJSONString(`{}`)))
	sameTime(t, "available_at of a delayed event", get(t, st, "nb-later").AvailableAt, micro(due))
	sameTime(t, "available_at of a past NotBefore", get(t, st, "nb-past").AvailableAt, micro(t0))
	claim := func(now time.Time) []core.Record {
		recs, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: testOwner, Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	claimedIDs(t, "one µs before due", claim(due.Add(-time.Microsecond)), "nb-past")
	claimedIDs(t, "at due", claim(due), "nb-past", "nb-later")
}

// ReleaseLeases clears the owner's leases on NEW and RETRY rows except the
// ids kept, and never touches DONE or DEAD rows or other owners' rows.
func (s *suite) testReleaseLeases(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	st := s.newStore(t, clk, jdbcstore.Config{})
	ctx := t.Context()
	mine := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
	for _, id := range []string{"new-1", "new-2", "retry", "keep", "done", "dead"} {
		insertLeased(t, st, jsonEvent(t, id), mine)
	}
	insertLeased(t, st, jsonEvent(t, "other"), core.Lease{Owner: "node-b", Until: t0.Add(time.Hour)})
	insertLeased(t, st, jsonEvent(t, "free"), core.Lease{})
	nextAt := t0.Add(time.Minute)
	changed, err := st.MarkRetry(ctx, "node-a", "retry", nextAt, nextAt.Add(time.Hour), "boom")
	mark(t, "retry", true, changed, err)
	if n, err := st.MarkDone(ctx, "node-a", []string{"done"}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	changed, err = st.MarkDead(ctx, "node-a", "dead", "boom")
	mark(t, "dead", true, changed, err)

	n, err := st.ReleaseLeases(ctx, "node-a", []string{"keep", "other"})
	if err != nil || n != 3 {
		t.Fatalf("ReleaseLeases: n=%d err=%v, want 3 (new-1, new-2, retry)", n, err)
	}
	for _, id := range []string{"new-1", "new-2", "retry"} {
		if rec := get(t, st, id); rec.LockedBy != "" || !rec.LockedUntil.IsZero() {
			t.Fatalf("%s: lease %q until %v, want released", id, rec.LockedBy, rec.LockedUntil)
		}
	}
	rec := get(t, st, "retry")
	if rec.Status != core.StatusRetry || rec.Attempts != 1 {
		t.Fatalf("retry row: status %v attempts %d, want RETRY 1", rec.Status, rec.Attempts)
	}
	sameTime(t, "released retry available_at", rec.AvailableAt, micro(nextAt))
	if rec := get(t, st, "keep"); rec.LockedBy != "node-a" {
		t.Fatalf("kept row lost its lease: %q", rec.LockedBy)
	}
	if rec := get(t, st, "other"); rec.LockedBy != "node-b" {
		t.Fatalf("another owner's row was released: %q", rec.LockedBy)
	}
	for id, want := range map[string]core.Status{"done": core.StatusDone, "dead": core.StatusDead} {
		if rec := get(t, st, id); rec.Status != want {
			t.Fatalf("%s: status %v, want %v", id, rec.Status, want)
		}
	}
	// The released rows are claimable by another node at once.
	recs, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: "node-c", Now: t0.Add(2 * time.Minute),
		LeaseUntil: t0.Add(time.Hour), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	claimedIDs(t, "claim after release", recs, "free", "new-1", "new-2", "retry")

	if n, err := st.ReleaseLeases(ctx, "node-a", nil); err != nil || n != 1 {
		t.Fatalf("release without exceptions: n=%d err=%v, want 1 (keep)", n, err)
	}
	if n, err := st.ReleaseLeases(ctx, "node-a", nil); err != nil || n != 0 {
		t.Fatalf("second release: n=%d err=%v, want 0", n, err)
	}
	if _, err := st.ReleaseLeases(ctx, "", nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("empty owner: %v, want ErrInvalidConfig", err)
	}
}
