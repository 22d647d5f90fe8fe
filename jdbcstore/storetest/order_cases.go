package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/txctx"
)

// orderedEvent builds an event of key with id.
func orderedEvent(t *testing.T, id, key string, onDead core.DeadPolicy) core.Envelope {
	t.Helper()
	env, err := core.NewEvent("Ordered").ID(id).OrderKey(key).OnDead(onDead).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// publishOrdered inserts env in a transaction of its own with lease and
// commits (or rolls back when rollback), returning whether the store used
// the lease.
func publishOrdered(t *testing.T, st *jdbcstore.Store, env core.Envelope, lease core.Lease, rollback bool) bool {
	t.Helper()
	ctx := t.Context()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	leased, err := st.InsertOrdered(ctx, tx, env, lease)
	if err != nil {
		_ = tx.Rollback()
		t.Fatalf("InsertOrdered %s: %v", env.ID(), err)
	}
	if rollback {
		err = tx.Rollback()
	} else {
		err = tx.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	return leased
}

// claimAll claims every claimable row for owner at now.
func claimAll(t *testing.T, st *jdbcstore.Store, owner string, now time.Time) []core.Record {
	t.Helper()
	recs, err := st.ClaimDue(t.Context(), core.ClaimRequest{Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Ordered events: positions per key without gaps (a rollback returns its
// position), the hot path only for a key with nothing pending, claims only
// of the first pending event of each key, and the dead policies.
func (s *suite) testOrder(t *testing.T) {
	t.Run("PositionsWithoutGaps", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		publishOrdered(t, st, orderedEvent(t, "p-1", "k", core.BlockOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "p-x", "k", core.BlockOnDead), core.Lease{}, true) // rolled back
		publishOrdered(t, st, orderedEvent(t, "p-2", "k", core.SkipOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "q-1", "other", core.BlockOnDead), core.Lease{}, false)
		for id, want := range map[string]int64{"p-1": 1, "p-2": 2, "q-1": 1} {
			r := get(t, st, id)
			if r.OrderSeq != want {
				t.Errorf("%s: OrderSeq %d, want %d", id, r.OrderSeq, want)
			}
			env, err := r.Envelope()
			if err != nil || env.OrderKey() == "" {
				t.Errorf("%s: envelope %v, order key %q", id, err, env.OrderKey())
			}
		}
		if r := get(t, st, "p-2"); r.OnDead != core.SkipOnDead || r.OrderKey != "k" {
			t.Errorf("p-2: key %q, policy %v; want k, skip", r.OrderKey, r.OnDead)
		}
		if _, err := st.Get(t.Context(), "p-x"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("rolled-back event: %v, want ErrNotFound", err)
		}
	})

	t.Run("HotPathOnlyForAFreeKey", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		if !publishOrdered(t, st, orderedEvent(t, "h-1", "k", core.BlockOnDead), lease, false) {
			t.Fatal("first event of a key did not take the lease")
		}
		if publishOrdered(t, st, orderedEvent(t, "h-2", "k", core.BlockOnDead), lease, false) {
			t.Fatal("event behind a pending one took the lease")
		}
		if r := get(t, st, "h-2"); r.LockedBy != "" {
			t.Fatalf("h-2 stored with owner %q, want none", r.LockedBy)
		}
		if n, err := st.MarkDone(t.Context(), "node-a", []string{"h-1"}); err != nil || n != 1 {
			t.Fatalf("MarkDone h-1: %d, %v", n, err)
		}
		clk.Advance(time.Second)
		if publishOrdered(t, st, orderedEvent(t, "h-3", "k", core.BlockOnDead), lease, false) {
			t.Fatal("h-3 took the lease while h-2 is pending")
		}
		if !publishOrdered(t, st, orderedEvent(t, "i-1", "free", core.BlockOnDead), lease, false) {
			t.Fatal("another key's first event did not take the lease")
		}
	})

	t.Run("DuplicateIDRefusedWithTheKeyFreeOrHeld", func(t *testing.T) {
		// The insert that takes the lease only for a free key reports a
		// duplicate id like the plain one, and leaves the caller's
		// transaction usable: with the key held (the row goes in unowned)
		// and with it free (the row would take the lease).
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		publishOrdered(t, st, orderedEvent(t, "d-1", "k", core.BlockOnDead), lease, false)
		publishOrdered(t, st, orderedEvent(t, "d-2", "k", core.BlockOnDead), lease, false)
		try := func(id string) {
			t.Helper()
			tx, err := st.DB().BeginTxx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback() //nolint:errcheck
			if _, err := st.InsertOrdered(t.Context(), tx, orderedEvent(t, id, "k", core.BlockOnDead), lease); !errors.Is(err, core.ErrDuplicateEvent) {
				t.Fatalf("ordered insert of existing id %s: %v, want ErrDuplicateEvent", id, err)
			}
			if _, err := st.InsertOrdered(t.Context(), tx, orderedEvent(t, id+"-new", "k2", core.BlockOnDead), lease); err != nil {
				t.Fatalf("the transaction is not usable after the duplicate: %v", err)
			}
		}
		try("d-1") // the event before (d-2) holds the key
		if n, err := st.MarkDone(t.Context(), "node-a", []string{"d-1"}); err != nil || n != 1 {
			t.Fatalf("MarkDone d-1: %d, %v", n, err)
		}
		if _, err := st.DB().ExecContext(t.Context(), "UPDATE "+st.Dialect().QuoteIdent(st.Table())+
			" SET status = "+strconv.Itoa(int(core.StatusDone))+", locked_by = NULL, locked_until = NULL WHERE event_id = 'd-2'"); err != nil {
			t.Fatal(err)
		}
		try("d-2") // the key is free
	})

	t.Run("RememberedPositionCheckedAgainstOtherWriters", func(t *testing.T) {
		// The store remembers the last event it committed on a key and
		// whether it marked it DONE, to spare the check of the event
		// before. An event another writer published meanwhile (here a
		// plain transaction, which the store cannot follow) must still
		// be seen: the next event goes behind it, unowned.
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		hooked := func(env core.Envelope) bool { return publishHooked(t, st, env, lease) }
		publishDone(t, st, orderedEvent(t, "m-1", "k", core.BlockOnDead), lease)           // first of its key
		publishDone(t, st, orderedEvent(t, "m-2", "k", core.BlockOnDead), lease)           // behind a DONE event
		publishOrdered(t, st, orderedEvent(t, "m-3", "k", core.BlockOnDead), lease, false) // another writer; stays pending
		if hooked(orderedEvent(t, "m-4", "k", core.BlockOnDead)) {
			t.Fatal("m-4 took the lease although m-3, published by another writer, is pending")
		}
		for id, want := range map[string]int64{"m-1": 1, "m-2": 2, "m-3": 3, "m-4": 4} {
			if r := get(t, st, id); r.OrderSeq != want {
				t.Errorf("%s at position %d, want %d", id, r.OrderSeq, want)
			}
		}
		if r := get(t, st, "m-4"); r.LockedBy != "" {
			t.Errorf("m-4 stored with owner %q, want none", r.LockedBy)
		}
	})

	t.Run("RememberedPositionCheckedAfterAPurge", func(t *testing.T) {
		// The retention purge removes the key's remembered last event,
		// DONE; another writer then publishes on the key and its event
		// stays pending. The next event must go behind it, unowned,
		// whether the key's positions go on (a keys table) or start again
		// (SQLite).
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		hooked := func(env core.Envelope) bool { return publishHooked(t, st, env, lease) }
		publishDone(t, st, orderedEvent(t, "u-1", "k", core.BlockOnDead), lease) // first of its key
		clk.Advance(time.Hour)
		if res, err := st.Purge(t.Context(), jdbcstore.PurgeOptions{DoneOlderThan: time.Minute}); err != nil || res.Done != 1 {
			t.Fatalf("Purge: %+v, %v; want u-1 removed", res, err)
		}
		publishOrdered(t, st, orderedEvent(t, "u-2", "k", core.BlockOnDead), core.Lease{}, false) // another writer; stays pending
		if hooked(orderedEvent(t, "u-3", "k", core.BlockOnDead)) {
			t.Fatal("u-3 took the lease although u-2, published by another writer after the purge, is pending")
		}
		u2, u3 := get(t, st, "u-2"), get(t, st, "u-3")
		if u3.OrderSeq != u2.OrderSeq+1 {
			t.Errorf("u-3 at position %d, want %d (right after u-2)", u3.OrderSeq, u2.OrderSeq+1)
		}
		if u3.LockedBy != "" {
			t.Errorf("u-3 stored with owner %q, want none", u3.LockedBy)
		}
		for _, r := range claimAll(t, st, "node-b", clk.Now().Add(2*time.Hour)) {
			if r.ID == "u-3" {
				t.Error("u-3 claimed while u-2 is pending")
			}
		}
	})

	t.Run("ClaimsTheHeadOfEachKeyOnly", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		for _, id := range []string{"a-1", "a-2", "a-3"} {
			publishOrdered(t, st, orderedEvent(t, id, "a", core.BlockOnDead), core.Lease{}, false)
			clk.Advance(time.Millisecond)
		}
		publishOrdered(t, st, orderedEvent(t, "b-1", "b", core.BlockOnDead), core.Lease{}, false)
		insertLeased(t, st, jsonEvent(t, "u-1"), core.Lease{})
		now := t0.Add(time.Minute)
		claimedIDs(t, "first claim", claimAll(t, st, "node-a", now), "a-1", "b-1", "u-1")
		if n, err := st.MarkDone(ctx, "node-a", []string{"b-1", "u-1"}); err != nil || n != 2 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		// Another node gets nothing: a-2 waits for a-1, which is leased.
		claimedIDs(t, "other node", claimAll(t, st, "node-b", now))
		// a-1 fails: RETRY holds the key.
		due := now.Add(time.Second)
		if ok, err := st.MarkRetry(ctx, "node-a", "a-1", due, due.Add(time.Minute), "boom"); err != nil || !ok {
			t.Fatalf("MarkRetry: %v %v", ok, err)
		}
		claimedIDs(t, "while a-1 waits for its retry", claimAll(t, st, "node-a", now))
		// a-1 succeeds: a-2 (only) becomes claimable, by any node.
		claimedIDs(t, "a-1 due again", claimAll(t, st, "node-a", due), "a-1")
		if n, err := st.MarkDone(ctx, "node-a", []string{"a-1"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		claimedIDs(t, "after a-1", claimAll(t, st, "node-b", due), "a-2")
	})

	// A key's event waits for a poller when it has no owner (published
	// behind a pending event) or its owner's lease ended (a node that is
	// gone); not while a live lease holds it, nor once it is DONE.
	t.Run("WaitingUnownedOrExpired", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		waiting := func(what string, want bool, keys ...string) {
			t.Helper()
			got, err := st.Waiting(ctx, keys)
			if err != nil || got != want {
				t.Fatalf("%s: Waiting(%v) = %v, %v; want %v", what, keys, got, err, want)
			}
		}
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Minute)}
		publishOrdered(t, st, orderedEvent(t, "w-1", "w", core.BlockOnDead), lease, false)
		waiting("a leased head", false, "w")
		publishOrdered(t, st, orderedEvent(t, "w-2", "w", core.BlockOnDead), lease, false) // behind w-1: unowned
		waiting("an unowned successor", true, "w", "none")
		waiting("no such key", false, "none")
		if n, err := st.MarkDone(ctx, "node-a", []string{"w-1"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		claimedIDs(t, "w-2 claimed", claimAll(t, st, "node-a", t0), "w-2")
		waiting("a live lease", false, "w")
		clk.Advance(2 * time.Minute) // node-a's lease ended
		waiting("an expired lease", true, "w")
		if n, err := st.MarkDone(ctx, "node-a", []string{"w-2"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		waiting("all DONE", false, "w")
		waiting("no keys", false)
	})

	// ClaimNext leases the event after each finished position, through
	// the key's index: only when it is claimable (its predecessor
	// finished, due, unowned or of an expired lease), one per position,
	// in claim order; nothing for a position with no event after it.
	t.Run("ClaimNextLeasesTheSuccessorOnly", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		for _, id := range []string{"n-1", "n-2", "n-3"} {
			publishOrdered(t, st, orderedEvent(t, id, "n", core.BlockOnDead), core.Lease{}, false)
			clk.Advance(time.Millisecond)
		}
		for _, id := range []string{"m-1", "m-2"} {
			publishOrdered(t, st, orderedEvent(t, id, "m", core.SkipOnDead), core.Lease{}, false)
			clk.Advance(time.Millisecond)
		}
		publishOrdered(t, st, orderedEvent(t, "z-1", "z", core.BlockOnDead), core.Lease{}, false)
		now := t0.Add(time.Minute)
		var res core.NextResult
		next := func(what, owner string, at time.Time, after []core.OrderPos, want ...string) {
			t.Helper()
			var err error
			res, err = st.ClaimNext(ctx, core.NextRequest{Owner: owner, Now: at, LeaseUntil: at.Add(time.Minute), After: after})
			if err != nil {
				t.Fatalf("%s: ClaimNext: %v", what, err)
			}
			if len(res.Locked) != 0 {
				t.Fatalf("%s: ClaimNext found %v locked, with no other transaction", what, res.Locked)
			}
			if what != "retry not due" && (len(res.Later) != 0 || !res.NextDue.IsZero()) {
				t.Fatalf("%s: ClaimNext found %v waiting until %v, with no event not due", what, res.Later, res.NextDue)
			}
			recs := res.Claimed
			claimedIDs(t, what, recs, want...)
			for _, r := range recs {
				if r.LockedBy != owner {
					t.Errorf("%s: %s leased to %q, want %q", what, r.ID, r.LockedBy, owner)
				}
				sameTime(t, what+": "+r.ID+" LockedUntil", r.LockedUntil, at.Add(time.Minute).Truncate(time.Microsecond))
				if got := get(t, st, r.ID); got.LockedBy != owner {
					t.Errorf("%s: %s stored lease %q, want %q", what, r.ID, got.LockedBy, owner)
				}
			}
		}
		// The predecessors are pending: nothing moves.
		next("predecessors pending", "node-a", now, []core.OrderPos{{Key: "n", Seq: 1}, {Key: "m", Seq: 1}})
		claimedIDs(t, "heads", claimAll(t, st, "node-a", now), "n-1", "m-1", "z-1")
		if n, err := st.MarkDone(ctx, "node-a", []string{"n-1", "z-1"}); err != nil || n != 2 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		if ok, err := st.MarkDead(ctx, "node-a", "m-1", "poison"); err != nil || !ok {
			t.Fatalf("MarkDead: %v %v", ok, err)
		}
		// n-2 follows a DONE event and m-2 a DEAD one of the skip policy;
		// z has nothing after z-1, "none" no rows at all.
		next("successors", "node-b", now, []core.OrderPos{{Key: "m", Seq: 1}, {Key: "n", Seq: 1}, {Key: "z", Seq: 1}, {Key: "none", Seq: 7}},
			"n-2", "m-2")
		// Leased now (node-b's live lease): neither node takes them again.
		next("live lease", "node-b", now, []core.OrderPos{{Key: "n", Seq: 1}, {Key: "m", Seq: 1}})
		next("live lease, other node", "node-a", now, []core.OrderPos{{Key: "n", Seq: 1}})
		// Once node-b's lease ended, another node takes n-2 over.
		later := now.Add(2 * time.Minute)
		next("expired lease", "node-a", later, []core.OrderPos{{Key: "n", Seq: 1}}, "n-2")
		// n-2 is leased by node-a now, and n-3, unowned, is not the event
		// after n-1: nothing for that position.
		next("not the successor", "node-a", later, []core.OrderPos{{Key: "n", Seq: 1}})
		// A RETRY successor waits until it is due.
		if n, err := st.MarkDone(ctx, "node-a", []string{"n-2"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		next("n-3 after n-2", "node-a", later, []core.OrderPos{{Key: "n", Seq: 2}}, "n-3")
		due := later.Add(time.Hour)
		if ok, err := st.MarkRetry(ctx, "node-a", "n-3", due, due.Add(time.Minute), "boom"); err != nil || !ok {
			t.Fatalf("MarkRetry: %v %v", ok, err)
		}
		if _, err := st.ReleaseLeases(ctx, "node-a", nil); err != nil {
			t.Fatal(err)
		}
		next("retry not due", "node-a", later, []core.OrderPos{{Key: "n", Seq: 2}})
		// It comes back as waiting, with its time, for the caller to ask
		// again then (a poll would not claim it before its next full claim).
		if !slices.Equal(res.Later, []core.OrderPos{{Key: "n", Seq: 2}}) {
			t.Fatalf("retry not due: Later = %v, want [{n 2}]", res.Later)
		}
		sameTime(t, "retry not due: NextDue", res.NextDue, due.Truncate(time.Microsecond))
		next("retry due", "node-a", due, []core.OrderPos{{Key: "n", Seq: 2}}, "n-3")
		next("no positions", "node-a", due, nil)
	})

	// While a transaction publishes the event after the one wanted, that
	// event is claimed or, where the publishing transaction locks it
	// (MySQL/MariaDB: its insert reads the row under a shared lock),
	// reported locked so that the caller asks again: never left to no
	// one. Once the transaction ended it is claimed. (Not on a
	// single-writer database, where the publishing transaction holds the
	// only write lock.)
	t.Run("ClaimNextWhileTheNextEventIsPublished", func(t *testing.T) {
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		if st.Dialect().Capabilities().SingleWriter {
			t.Skip("one writer at a time: a claim waits for the publishing transaction")
		}
		t.Parallel()
		ctx := t.Context()
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Minute)}
		publishOrdered(t, st, orderedEvent(t, "l-1", "l", core.BlockOnDead), lease, false)
		publishOrdered(t, st, orderedEvent(t, "l-2", "l", core.BlockOnDead), lease, false) // behind l-1: unowned
		if n, err := st.MarkDone(ctx, "node-a", []string{"l-1"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		tx, err := st.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck // committed below
		if _, err := st.InsertOrdered(ctx, tx, orderedEvent(t, "l-3", "l", core.BlockOnDead), lease); err != nil {
			t.Fatal(err)
		}
		req := core.NextRequest{Owner: "node-b", Now: t0, LeaseUntil: t0.Add(time.Minute), After: []core.OrderPos{{Key: "l", Seq: 1}}}
		res, err := st.ClaimNext(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(res.Claimed) == 1 && res.Claimed[0].ID == "l-2" && len(res.Locked) == 0:
			return // claimed at once (PostgreSQL: the publisher's read takes no lock)
		case len(res.Claimed) == 0 && len(res.Locked) == 1 && res.Locked[0] == req.After[0]:
		default:
			t.Fatalf("ClaimNext during the publish = %+v, want l-2 claimed or its position locked", res)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		res, err = st.ClaimNext(ctx, req)
		if err != nil || len(res.Locked) != 0 {
			t.Fatalf("ClaimNext after the publish = %+v, %v", res, err)
		}
		claimedIDs(t, "after the publish", res.Claimed, "l-2")
	})

	// WaitingAfter finds, among finished events given by id (the hot
	// path knows no position), those behind which an event waits for a
	// poller (unowned or of an expired lease; not a live lease), one per
	// key, the later counting; unordered and unknown ids are ignored.
	// ClaimNext then claims at those positions, the later of two of a
	// key counting there too.
	t.Run("WaitingAfterByID", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Minute)}
		for _, id := range []string{"i-1", "i-2", "i-3"} {
			publishOrdered(t, st, orderedEvent(t, id, "i", core.BlockOnDead), lease, false)
			clk.Advance(time.Millisecond)
		}
		publishOrdered(t, st, orderedEvent(t, "h-1", "h", core.BlockOnDead), lease, false)
		publishOrdered(t, st, orderedEvent(t, "h-2", "h", core.BlockOnDead), lease, false)
		publishOrdered(t, st, orderedEvent(t, "g-1", "g", core.BlockOnDead), lease, false) // nothing after it
		insertLeased(t, st, jsonEvent(t, "plain"), lease)
		if n, err := st.MarkDone(ctx, "node-a", []string{"i-1", "h-1", "g-1", "plain"}); err != nil || n != 4 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		waiting := func(what string, at time.Time, ids []string, want ...core.OrderPos) {
			t.Helper()
			got, err := st.WaitingAfter(ctx, at, ids)
			if err != nil {
				t.Fatalf("%s: WaitingAfter: %v", what, err)
			}
			slices.SortFunc(got, func(a, b core.OrderPos) int { return strings.Compare(a.Key, b.Key) })
			if !slices.Equal(got, want) {
				t.Fatalf("%s: WaitingAfter(%v) = %v, want %v", what, ids, got, want)
			}
		}
		now := clk.Now()
		waiting("unowned successors", now, []string{"i-1", "h-1", "g-1", "plain", "missing"},
			core.OrderPos{Key: "h", Seq: 1}, core.OrderPos{Key: "i", Seq: 1})
		waiting("no ids", now, nil)
		res, err := st.ClaimNext(ctx, core.NextRequest{Owner: "node-b", Now: now, LeaseUntil: now.Add(time.Minute),
			After: []core.OrderPos{{Key: "h", Seq: 1}, {Key: "i", Seq: 1}}})
		if err != nil || len(res.Locked) != 0 {
			t.Fatalf("ClaimNext: %+v, %v", res, err)
		}
		claimedIDs(t, "at the positions found", res.Claimed, "i-2", "h-2")
		waiting("a live lease", now, []string{"i-1", "h-1"})
		waiting("an expired lease", now.Add(2*time.Minute), []string{"h-1"}, core.OrderPos{Key: "h", Seq: 1})
		if n, err := st.MarkDone(ctx, "node-b", []string{"i-2"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		waiting("the later of a key", now, []string{"i-1", "i-2"}, core.OrderPos{Key: "i", Seq: 2})
		res, err = st.ClaimNext(ctx, core.NextRequest{Owner: "node-b", Now: now, LeaseUntil: now.Add(time.Minute),
			After: []core.OrderPos{{Key: "i", Seq: 1}, {Key: "i", Seq: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		claimedIDs(t, "the later position of a key", res.Claimed, "i-3")
		if _, err := st.WaitingAfter(ctx, now, []string{"ok", ""}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("WaitingAfter with an empty id = %v, want an error wrapping ErrInvalidConfig", err)
		}
		if _, err := st.WaitingAfter(ctx, now, []string{"i\xff"}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("WaitingAfter with an id of invalid UTF-8 = %v, want an error wrapping ErrInvalidConfig", err)
		}
		if _, err := st.WaitingAfter(ctx, now, []string{strings.Repeat("i", core.MaxEventIDLen+1)}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("WaitingAfter with a long id = %v, want an error wrapping ErrInvalidConfig", err)
		}
	})

	// Lists longer than one statement takes (200 positions or ids) are
	// split: every position and id counts, whichever statement it falls in.
	t.Run("ClaimNextAndWaitingAfterSpanStatements", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		const keys = 205
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Minute)}
		firsts := make([]string, keys)
		seconds := make([]string, keys)
		for i := range keys {
			firsts[i], seconds[i] = fmt.Sprintf("s%03d-1", i), fmt.Sprintf("s%03d-2", i)
			publishOrdered(t, st, orderedEvent(t, firsts[i], fmt.Sprintf("s%03d", i), core.BlockOnDead), lease, false)
		}
		for i := range keys {
			clk.Advance(time.Millisecond)
			publishOrdered(t, st, orderedEvent(t, seconds[i], fmt.Sprintf("s%03d", i), core.BlockOnDead), lease, false) // behind: unowned
		}
		if n, err := st.MarkDone(ctx, "node-a", firsts); err != nil || n != keys {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		now := clk.Now()
		after, err := st.WaitingAfter(ctx, now, firsts)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != keys {
			t.Fatalf("WaitingAfter found %d positions, want %d", len(after), keys)
		}
		res, err := st.ClaimNext(ctx, core.NextRequest{Owner: "node-b", Now: now, LeaseUntil: now.Add(time.Minute), After: after})
		if err != nil || len(res.Locked) != 0 {
			t.Fatalf("ClaimNext: %d claimed, locked %v, %v", len(res.Claimed), res.Locked, err)
		}
		claimedIDs(t, "the successors of every position", res.Claimed, seconds...)
	})

	// ClaimNext refuses bad requests with a configuration error, before
	// reading anything.
	t.Run("ClaimNextRefusesBadRequests", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		ok := core.NextRequest{Owner: "node-a", Now: t0, LeaseUntil: t0.Add(time.Minute), After: []core.OrderPos{{Key: "k", Seq: 1}}}
		long := strings.Repeat("k", core.MaxOrderKeyLen+1)
		for name, mutate := range map[string]func(r *core.NextRequest){
			"no owner":        func(r *core.NextRequest) { r.Owner = "" },
			"lease not after": func(r *core.NextRequest) { r.LeaseUntil = r.Now },
			"empty key":       func(r *core.NextRequest) { r.After = []core.OrderPos{{Key: "", Seq: 1}} },
			"key too long":    func(r *core.NextRequest) { r.After = []core.OrderPos{{Key: long, Seq: 1}} },
			"seq zero":        func(r *core.NextRequest) { r.After = []core.OrderPos{{Key: "k", Seq: 1}, {Key: "k", Seq: 0}} },
			"invalid UTF-8":   func(r *core.NextRequest) { r.After = []core.OrderPos{{Key: "k\xff", Seq: 1}} },
			"NUL in key":      func(r *core.NextRequest) { r.After = []core.OrderPos{{Key: "k\x00", Seq: 1}} },
		} {
			req := ok
			mutate(&req)
			if _, err := st.ClaimNext(t.Context(), req); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("%s: ClaimNext = %v, want an error wrapping ErrInvalidConfig", name, err)
			}
		}
		if _, err := st.ClaimNext(t.Context(), ok); err != nil {
			t.Errorf("valid request: %v", err)
		}
	})

	t.Run("DeadPolicies", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		publishOrdered(t, st, orderedEvent(t, "blk-1", "blk", core.BlockOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "blk-2", "blk", core.BlockOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "skp-1", "skp", core.SkipOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "skp-2", "skp", core.SkipOnDead), core.Lease{}, false)
		now := t0.Add(time.Minute)
		claimedIDs(t, "heads", claimAll(t, st, "node-a", now), "blk-1", "skp-1")
		for _, id := range []string{"blk-1", "skp-1"} {
			if ok, err := st.MarkDead(ctx, "node-a", id, "poison"); err != nil || !ok {
				t.Fatalf("MarkDead %s: %v %v", id, ok, err)
			}
		}
		claimedIDs(t, "after the dead", claimAll(t, st, "node-a", now), "skp-2")
		if n, err := st.MarkDone(ctx, "node-a", []string{"skp-2"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		stats, err := st.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stats.BlockedKeys != 1 {
			t.Errorf("Stats.BlockedKeys = %d, want 1 (blk)", stats.BlockedKeys)
		}
		// Replaying the dead event releases the key once it is delivered.
		res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{"blk-1"}}, jdbcstore.ReplayOptions{})
		if err != nil || res.Replayed != 1 {
			t.Fatalf("ReplayDead: %+v, %v", res, err)
		}
		clk.Advance(time.Second)
		claimedIDs(t, "after the replay", claimAll(t, st, "node-a", clk.Now().Add(time.Minute)), "blk-1")
		if n, err := st.MarkDone(ctx, "node-a", []string{"blk-1"}); err != nil || n != 1 {
			t.Fatalf("MarkDone: %d, %v", n, err)
		}
		claimedIDs(t, "after the replayed event", claimAll(t, st, "node-a", clk.Now().Add(time.Minute)), "blk-2")
	})

	t.Run("ReplayLeavesASkippedEventWhoseKeyWentOn", func(t *testing.T) {
		// Under the skip policy the key goes on past a DEAD event: a
		// replay would deliver it after (or while) its successors are
		// delivered, so it stays DEAD. Under the block policy, and when
		// nothing followed, the replay goes ahead.
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		for _, id := range []string{"s-1", "s-2", "s-3"} {
			publishOrdered(t, st, orderedEvent(t, id, "sk", core.SkipOnDead), core.Lease{}, false)
		}
		publishOrdered(t, st, orderedEvent(t, "b-1", "bk", core.BlockOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "b-2", "bk", core.BlockOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "l-1", "lk", core.SkipOnDead), core.Lease{}, false) // the last of its key
		now := t0.Add(time.Minute)
		claimedIDs(t, "heads", claimAll(t, st, "node-a", now), "b-1", "l-1", "s-1")
		for _, id := range []string{"s-1", "b-1", "l-1"} {
			if ok, err := st.MarkDead(ctx, "node-a", id, "poison"); err != nil || !ok {
				t.Fatalf("MarkDead %s: %v %v", id, ok, err)
			}
		}
		claimedIDs(t, "after the dead", claimAll(t, st, "node-a", now), "s-2") // in flight on node-a
		wentOn := []jdbcstore.Unchanged{{ID: "s-1", Reason: jdbcstore.ReasonKeyWentOn}}
		f := jdbcstore.DeadFilter{EventType: "Ordered"}
		dry, err := st.ReplayDead(ctx, f, jdbcstore.ReplayOptions{DryRun: true})
		if err != nil || dry.Matched != 3 || dry.Replayed != 0 || !slices.Equal(dry.IDs, []string{"b-1", "l-1"}) || !slices.Equal(dry.NotReplayed, wentOn) {
			t.Fatalf("dry ReplayDead = %+v, %v; want b-1 and l-1 replayable, s-1 not (its key went on)", dry, err)
		}
		res, err := st.ReplayDead(ctx, f, jdbcstore.ReplayOptions{BatchSize: 1})
		if err != nil || res.Matched != 3 || res.Replayed != 2 || !slices.Equal(res.IDs, []string{"b-1", "l-1"}) || !slices.Equal(res.NotReplayed, wentOn) {
			t.Fatalf("ReplayDead = %+v, %v; want b-1 and l-1 replayed, s-1 left DEAD (its key went on)", res, err)
		}
		if r := get(t, st, "s-1"); r.Status != core.StatusDead || r.LastError != "poison" {
			t.Fatalf("s-1 after the replay: %v, %q; want DEAD as it was", r.Status, r.LastError)
		}
		// Another node takes the replayed events, never s-1 or s-3 while
		// s-2 is in flight.
		clk.Advance(time.Second)
		later := clk.Now().Add(time.Minute)
		claimedIDs(t, "after the replay", claimAll(t, st, "node-b", later), "b-1", "l-1")
		if n, err := st.MarkDone(ctx, "node-a", []string{"s-2"}); err != nil || n != 1 {
			t.Fatalf("MarkDone s-2: %d, %v", n, err)
		}
		claimedIDs(t, "after s-2", claimAll(t, st, "node-c", later), "s-3")
		// By id, with one of the ids not DEAD: the same answer.
		res, err = st.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{"s-1", "s-3"}}, jdbcstore.ReplayOptions{})
		if err != nil || res.Matched != 1 || res.Replayed != 0 || len(res.IDs) != 0 || !slices.Equal(res.NotReplayed, wentOn) {
			t.Fatalf("ReplayDead by id = %+v, %v", res, err)
		}
		// Discarding it is the way out.
		if d, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{IDs: []string{"s-1"}}, jdbcstore.DiscardOptions{}); err != nil || d.Discarded != 1 {
			t.Fatalf("DiscardDead s-1 = %+v, %v", d, err)
		}
	})

	t.Run("ReplayLeavesASkippedEventWhoseSuccessorWasPurged", func(t *testing.T) {
		// Once the later events of a key that went on without its DEAD
		// event are past their retention, a replay must still see that the
		// key went on. A keys table remembers the key's last position;
		// SQLite keeps none, so its purge keeps the key's last row while
		// the DEAD event is there (it replayed the event, out of order,
		// before: an audit).
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		single := st.Dialect().Capabilities().SingleWriter
		done := func(id string) {
			t.Helper()
			claimedIDs(t, id, claimAll(t, st, "node-a", clk.Now().Add(time.Minute)), id)
			if n, err := st.MarkDone(ctx, "node-a", []string{id}); err != nil || n != 1 {
				t.Fatalf("MarkDone %s: %d, %v", id, n, err)
			}
		}
		purge := func(what string, want int64) {
			t.Helper()
			clk.Advance(2 * time.Hour)
			opts := jdbcstore.PurgeOptions{DoneOlderThan: time.Hour}
			dry, err := st.Purge(ctx, jdbcstore.PurgeOptions{DoneOlderThan: time.Hour, DryRun: true})
			if err != nil || dry.Done != want {
				t.Fatalf("%s: dry run = %+v, %v; want %d DONE rows", what, dry, err, want)
			}
			if res, err := st.Purge(ctx, opts); err != nil || res.Done != want {
				t.Fatalf("%s: Purge = %+v, %v; want %d DONE rows removed", what, res, err, want)
			}
		}
		publishOrdered(t, st, orderedEvent(t, "p-1", "pk", core.SkipOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "p-2", "pk", core.SkipOnDead), core.Lease{}, false)
		claimedIDs(t, "head", claimAll(t, st, "node-a", t0.Add(time.Minute)), "p-1")
		if ok, err := st.MarkDead(ctx, "node-a", "p-1", "poison"); err != nil || !ok {
			t.Fatalf("MarkDead: %v %v", ok, err)
		}
		done("p-2")
		// SQLite keeps p-2, the key's last row behind the DEAD p-1.
		purge("the successor past its retention", map[bool]int64{true: 0, false: 1}[single])
		wentOn := []jdbcstore.Unchanged{{ID: "p-1", Reason: jdbcstore.ReasonKeyWentOn}}
		for _, dryRun := range []bool{true, false} {
			res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{"p-1"}}, jdbcstore.ReplayOptions{DryRun: dryRun})
			if err != nil || res.Replayed != 0 || len(res.IDs) != 0 || !slices.Equal(res.NotReplayed, wentOn) {
				t.Fatalf("ReplayDead (dry run %v) = %+v, %v; want p-1 left DEAD (its key went on)", dryRun, res, err)
			}
		}
		// The key goes on after the last row kept; that row may go once a
		// later one is there, which is kept in its place.
		publishOrdered(t, st, orderedEvent(t, "p-3", "pk", core.SkipOnDead), core.Lease{}, false)
		if p3 := get(t, st, "p-3"); p3.OrderSeq != 3 {
			t.Fatalf("p-3 at position %d, want 3", p3.OrderSeq)
		}
		done("p-3")
		purge("a successor behind a later one", 1)
		if _, err := st.Get(ctx, "p-3"); single && err != nil {
			t.Fatalf("p-3, the key's last row, purged on SQLite: %v", err)
		}
		// Once the DEAD event is gone, nothing holds the last row back.
		if d, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{IDs: []string{"p-1"}}, jdbcstore.DiscardOptions{}); err != nil || d.Discarded != 1 {
			t.Fatalf("DiscardDead p-1 = %+v, %v", d, err)
		}
		purge("the last row once the DEAD event is discarded", map[bool]int64{true: 1, false: 0}[single])
	})

	t.Run("ReplayWaitsForAPublishOnTheKey", func(t *testing.T) {
		// A transaction publishing the next event of a skipped key while
		// its DEAD event is replayed: the replay waits for it (servers:
		// the key's row lock; SQLite: the write lock) and then leaves the
		// event DEAD, never replaying it while the new event may take the
		// hot path.
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		publishOrdered(t, st, orderedEvent(t, "w-1", "wk", core.SkipOnDead), core.Lease{}, false)
		claimedIDs(t, "head", claimAll(t, st, "node-a", t0.Add(time.Minute)), "w-1")
		if ok, err := st.MarkDead(ctx, "node-a", "w-1", "poison"); err != nil || !ok {
			t.Fatalf("MarkDead: %v %v", ok, err)
		}
		open, err := st.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Rollback() //nolint:errcheck
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		if _, err := st.InsertOrdered(ctx, open, orderedEvent(t, "w-2", "wk", core.SkipOnDead), lease); err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			res jdbcstore.ReplayResult
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{"w-1"}}, jdbcstore.ReplayOptions{})
			done <- outcome{res, err}
		}()
		select {
		case got := <-done:
			t.Fatalf("ReplayDead returned while a transaction publishing on the key is open: %+v, %v", got.res, got.err)
		case <-time.After(200 * time.Millisecond): // it must not return: a negative check, bounded
		}
		if err := open.Commit(); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if got.err != nil || got.res.Replayed != 0 || !slices.Equal(got.res.NotReplayed, []jdbcstore.Unchanged{{ID: "w-1", Reason: jdbcstore.ReasonKeyWentOn}}) {
			t.Fatalf("ReplayDead = %+v, %v; want w-1 left DEAD", got.res, got.err)
		}
		if r := get(t, st, "w-1"); r.Status != core.StatusDead {
			t.Fatalf("w-1 is %v, want DEAD", r.Status)
		}
	})

	t.Run("DiscardReleasesTheKey", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		for _, id := range []string{"d-1", "d-2", "d-3"} {
			publishOrdered(t, st, orderedEvent(t, id, "dk", core.BlockOnDead), core.Lease{}, false)
		}
		publishOrdered(t, st, orderedEvent(t, "e-1", "ek", core.BlockOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "e-2", "ek", core.BlockOnDead), core.Lease{}, false)
		publishOrdered(t, st, orderedEvent(t, "s-1", "sk", core.SkipOnDead), core.Lease{}, false)
		now := t0.Add(time.Minute)
		claimedIDs(t, "heads", claimAll(t, st, "node-a", now), "d-1", "e-1", "s-1")
		for _, id := range []string{"e-1", "d-1", "s-1"} { // e-1 dies first
			clk.Advance(time.Second)
			if ok, err := st.MarkDead(ctx, "node-a", id, "poison "+id); err != nil || !ok {
				t.Fatalf("MarkDead %s: %v %v", id, ok, err)
			}
		}
		if n, err := st.CountBlockedKeys(ctx); err != nil || n != 2 {
			t.Fatalf("CountBlockedKeys = %d, %v; want 2 (dk, ek; sk skips)", n, err)
		}
		keys, err := st.BlockedKeys(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 || keys[0].Key != "ek" || keys[0].EventID != "e-1" || keys[1].Key != "dk" || keys[1].EventID != "d-1" {
			t.Fatalf("BlockedKeys = %+v, want ek (e-1) then dk (d-1), longest blocked first", keys)
		}
		if k := keys[1]; k.EventType != "Ordered" || k.Seq != 1 || k.LastError != "poison d-1" || !k.DiedAt.Equal(t0.Add(2*time.Second).Truncate(time.Microsecond)) {
			t.Errorf("BlockedKeys[1] = %+v", k)
		}
		if keys, err := st.BlockedKeys(ctx, 1); err != nil || len(keys) != 1 || keys[0].Key != "ek" {
			t.Errorf("BlockedKeys(1) = %+v, %v", keys, err)
		}
		if _, err := st.BlockedKeys(ctx, 0); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("BlockedKeys(0) = %v, want ErrInvalidConfig", err)
		}
		if _, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{}, jdbcstore.DiscardOptions{}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("DiscardDead without a filter = %v, want ErrInvalidConfig", err)
		}
		dry, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{IDs: []string{"d-1", "d-2"}}, jdbcstore.DiscardOptions{DryRun: true})
		if err != nil || dry.Matched != 1 || dry.Discarded != 0 || len(dry.IDs) != 1 || dry.IDs[0] != "d-1" {
			t.Fatalf("dry DiscardDead = %+v, %v; want d-1 matched (d-2 is not DEAD), none discarded", dry, err)
		}
		get(t, st, "d-1")
		res, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{IDs: []string{"d-1", "d-2"}}, jdbcstore.DiscardOptions{BatchSize: 1})
		if err != nil || res.Matched != 1 || res.Discarded != 1 {
			t.Fatalf("DiscardDead = %+v, %v", res, err)
		}
		if _, err := st.Get(ctx, "d-1"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("discarded event: %v, want ErrNotFound", err)
		}
		// The key is free: d-2 (only) becomes claimable; ek stays blocked.
		claimedIDs(t, "after the discard", claimAll(t, st, "node-b", clk.Now().Add(time.Minute)), "d-2")
		if n, err := st.CountBlockedKeys(ctx); err != nil || n != 1 {
			t.Errorf("CountBlockedKeys after the discard = %d, %v; want 1", n, err)
		}
		// A publish on a key whose dead event was discarded takes the hot path.
		if n, err := st.MarkDone(ctx, "node-b", []string{"d-2"}); err != nil || n != 1 {
			t.Fatalf("MarkDone d-2: %d, %v", n, err)
		}
		res, err = st.DiscardDead(ctx, jdbcstore.DeadFilter{}, jdbcstore.DiscardOptions{All: true})
		if err != nil || res.Discarded != 2 || len(res.IDs) != 2 { // e-1, s-1
			t.Fatalf("DiscardDead All = %+v, %v", res, err)
		}
		claimedIDs(t, "after discarding every dead event", claimAll(t, st, "node-b", clk.Now().Add(time.Minute)), "d-3", "e-2")
		if n, err := st.CountBlockedKeys(ctx); err != nil || n != 0 {
			t.Errorf("CountBlockedKeys at the end = %d, %v; want 0", n, err)
		}
	})

	t.Run("ConcurrentTransactionsOnAKeyAreSerialized", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		first, err := st.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Rollback() //nolint:errcheck
		if _, err := st.InsertOrdered(ctx, first, orderedEvent(t, "s-1", "k", core.BlockOnDead), core.Lease{}); err != nil {
			t.Fatal(err)
		}
		// A second transaction on the key waits for the first (SQLite:
		// for the write lock; servers: for the key's row lock).
		done := make(chan error, 1)
		go func() { done <- publishTx(ctx, st, orderedEvent(t, "s-2", "k", core.BlockOnDead)) }()
		select {
		case err := <-done:
			t.Fatalf("second transaction on the key finished while the first is open: %v", err)
		case <-time.After(200 * time.Millisecond): // it must not finish: a negative check, bounded
		}
		if err := first.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if a, b := get(t, st, "s-1").OrderSeq, get(t, st, "s-2").OrderSeq; a != 1 || b != 2 {
			t.Fatalf("positions %d, %d; want 1, 2 (commit order)", a, b)
		}
	})

	t.Run("PredecessorSeenDespiteAnOlderSnapshot", func(t *testing.T) {
		// A transaction that read the table before the predecessor
		// committed (its snapshot, under REPEATABLE READ, predates it)
		// must still see that the predecessor is pending: it must not
		// take the hot path. A serialization error is acceptable too.
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		first, err := st.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Rollback() //nolint:errcheck
		if _, err := st.InsertOrdered(ctx, first, orderedEvent(t, "r-1", "k", core.BlockOnDead), lease); err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			leased bool
			err    error
		}
		snapshot, done := make(chan struct{}), make(chan outcome, 1)
		go func() {
			second, err := st.DB().BeginTxx(ctx, nil)
			if err != nil {
				close(snapshot)
				done <- outcome{err: err}
				return
			}
			defer second.Rollback() //nolint:errcheck
			var n int
			err = second.QueryRowxContext(ctx, "SELECT COUNT(*) FROM "+st.Dialect().QuoteIdent(st.Table())).Scan(&n)
			close(snapshot)
			if err != nil {
				done <- outcome{err: err}
				return
			}
			leased, err := st.InsertOrdered(ctx, second, orderedEvent(t, "r-2", "k", core.BlockOnDead), lease)
			if err == nil {
				err = second.Commit()
			}
			done <- outcome{leased: leased, err: err}
		}()
		select {
		case <-snapshot:
		case <-time.After(200 * time.Millisecond): // SQLite: the second BEGIN waits for the first transaction
		}
		if err := first.Commit(); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if got.err == nil && got.leased {
			t.Fatal("r-2 took the hot path although r-1 is pending: the predecessor was read from an old snapshot")
		}
		t.Logf("second transaction: leased=%v err=%v", got.leased, got.err)
	})

	t.Run("NeedsATransaction", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		_, err := st.InsertOrdered(t.Context(), st.DB(), orderedEvent(t, "n-1", "k", core.BlockOnDead), core.Lease{})
		if !errors.Is(err, core.ErrOrderingUnsupported) {
			t.Fatalf("InsertOrdered on the pool = %v, want ErrOrderingUnsupported", err)
		}
	})
}

// publishTx inserts env in a transaction of its own and commits.
func publishTx(ctx context.Context, st *jdbcstore.Store, env core.Envelope) error {
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := st.InsertOrdered(ctx, tx, env, core.Lease{}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// publishHooked inserts env as an ordered event with lease in a txctx
// transaction (which has after-commit hooks: the store may remember the
// key's last event) and reports whether the row took the lease.
func publishHooked(t *testing.T, st *jdbcstore.Store, env core.Envelope, lease core.Lease) bool {
	t.Helper()
	var leased bool
	err := txctx.NewX(st.DB()).Do(t.Context(), func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		var err error
		leased, err = st.InsertOrdered(ctx, tx, env, lease)
		return err
	})
	if err != nil {
		t.Fatalf("publish %s: %v", env.ID(), err)
	}
	return leased
}

// publishDone publishes env with lease as publishHooked does, requires it
// to take the lease (its key free) and marks it DONE as lease's owner.
func publishDone(t *testing.T, st *jdbcstore.Store, env core.Envelope, lease core.Lease) {
	t.Helper()
	if !publishHooked(t, st, env, lease) {
		t.Fatalf("%s, its key free, did not take the lease", env.ID())
	}
	if n, err := st.MarkDone(t.Context(), lease.Owner, []string{env.ID()}); err != nil || n != 1 {
		t.Fatalf("MarkDone %s: %d, %v", env.ID(), n, err)
	}
}
