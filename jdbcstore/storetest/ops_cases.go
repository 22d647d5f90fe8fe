package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// opsFixture: a store whose clock starts at t0 with, one second apart:
// a-0..a-2 DEAD type A (tenant t1 for a-0, a-1), b-0 DEAD type B, n-0 NEW,
// r-0 RETRY, d-0 DONE.
func (s *suite) opsFixture(t *testing.T) (*jdbcstore.Store, *clock) {
	t.Helper()
	clk := newClock(t0)
	st := s.newStore(t, clk, jdbcstore.Config{})
	ctx := t.Context()
	add := func(id, typ, tenant string) {
		b := core.NewEvent(typ).ID(id).PayloadJSONString(`{}`)
		if tenant != "" {
			b.TenantID(tenant)
		}
		insert(t, st, build(t, b))
		clk.Advance(time.Second)
	}
	add("a-0", "A", "t1")
	add("a-1", "A", "t1")
	add("a-2", "A", "")
	add("b-0", "B", "")
	add("n-0", "A", "")
	add("r-0", "A", "")
	add("d-0", "A", "")
	for _, id := range []string{"a-0", "a-1", "a-2", "b-0"} {
		if ok, err := st.MarkDead(ctx, testOwner, id, "poison "+id); !ok || err != nil {
			t.Fatalf("MarkDead %s: %v %v", id, ok, err)
		}
	}
	if ok, err := st.MarkRetry(ctx, testOwner, "r-0", t0, testLease.Until, "x"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := markDone(ctx, st, "d-0"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	return st, clk
}

func (s *suite) testOps(t *testing.T) {
	t.Run("Stats", func(t *testing.T) {
		t.Parallel()
		st, clk := s.opsFixture(t)
		clk.Set(t0.Add(time.Minute))
		stats, err := st.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := map[core.Status]int{core.StatusNew: 1, core.StatusRetry: 1, core.StatusDone: 1, core.StatusDead: 4}
		for k, v := range want {
			if stats.Counts[k] != v {
				t.Errorf("Counts[%v] = %d, want %d", k, stats.Counts[k], v)
			}
		}
		sameTime(t, "OldestPending", stats.OldestPending, micro(t0.Add(4*time.Second))) // n-0
		// r-0, created after n-0, has been due again since t0.
		if want := time.Minute - time.Duration(micro(t0).Sub(t0)); stats.Lag < want-time.Millisecond || stats.Lag > want+time.Millisecond {
			t.Errorf("Lag = %v, want ≈ %v", stats.Lag, want)
		}
		if stats.DeadByType["A"] != 3 || stats.DeadByType["B"] != 1 || len(stats.DeadByType) != 2 {
			t.Errorf("DeadByType = %v", stats.DeadByType)
		}
	})

	// An event waiting for its NotBefore is pending but no lag: the
	// lag counted the hour it was meant to wait (as the dashboard and
	// outboxctl showed it), where the poller's gauge said 0.
	t.Run("StatsLagCountsOnlyDueEvents", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		insert(t, st, build(t, core.NewEvent("Later").ID("later").NotBefore(t0.Add(time.Hour)).PayloadJSONString(`{}`)))
		clk.Set(t0.Add(50 * time.Minute))
		stats, err := st.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sameTime(t, "OldestPending", stats.OldestPending, micro(t0))
		if stats.Lag != 0 {
			t.Errorf("Lag = %v with the only pending event due in 10 minutes, want 0", stats.Lag)
		}
		clk.Set(t0.Add(70 * time.Minute))
		if stats, err = st.Stats(t.Context()); err != nil {
			t.Fatal(err)
		}
		if want := 10 * time.Minute; stats.Lag < want-time.Millisecond || stats.Lag > want+time.Millisecond {
			t.Errorf("Lag = %v 10 minutes after the event was due, want ≈ %v", stats.Lag, want)
		}
	})

	t.Run("FirstDue", func(t *testing.T) {
		// The earliest available_at of the NEW and RETRY rows, due or
		// not (the poller's lag probe); zero for none; DONE and DEAD rows
		// do not count.
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		if due, err := st.FirstDue(ctx); err != nil || !due.IsZero() {
			t.Fatalf("FirstDue of an empty table = %v, %v; want zero", due, err)
		}
		insert(t, st, build(t, core.NewEvent("Later").ID("later").NotBefore(t0.Add(time.Hour)).PayloadJSONString(`{}`)))
		if due, err := st.FirstDue(ctx); err != nil {
			t.Fatal(err)
		} else {
			sameTime(t, "FirstDue with one event due later", due, micro(t0.Add(time.Hour)))
		}
		insert(t, st, jsonEvent(t, "now")) // leased to testLease's owner
		if ok, err := st.MarkRetry(ctx, testLease.Owner, "now", t0.Add(2*time.Minute), t0.Add(time.Hour), "failed"); err != nil || !ok {
			t.Fatalf("MarkRetry: %v %v", ok, err)
		}
		if due, err := st.FirstDue(ctx); err != nil {
			t.Fatal(err)
		} else {
			sameTime(t, "FirstDue with a RETRY row due first", due, micro(t0.Add(2*time.Minute)))
		}
		if ok, err := st.MarkDead(ctx, testLease.Owner, "now", "gave up"); err != nil || !ok {
			t.Fatalf("MarkDead: %v %v", ok, err)
		}
		if due, err := st.FirstDue(ctx); err != nil {
			t.Fatal(err)
		} else {
			sameTime(t, "FirstDue once the RETRY row is DEAD", due, micro(t0.Add(time.Hour)))
		}
		//lint:ignore SA1012 a nil ctx is part of the contract
		if _, err := st.FirstDue(nil); !errors.Is(err, core.ErrNilContext) {
			t.Errorf("FirstDue(nil) = %v, want core.ErrNilContext", err)
		}
	})

	// The events behind an unfinished event of their key (a DEAD one
	// holding it, one waiting for its retry) are no lag, as no claim can
	// take them: the lag of the poller's claims read 0 for a blocked key,
	// Stats and FirstDue the age of the events behind it, so the gauge
	// swung between the two as the node held events or not.
	t.Run("LagLeavesOutEventsWaitingForTheirKey", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		for _, e := range []struct{ id, key string }{{"b-1", "blocked"}, {"b-2", "blocked"}, {"w-1", "waits"}, {"w-2", "waits"}} {
			publishOrdered(t, st, orderedEvent(t, e.id, e.key, core.BlockOnDead), testLease, false)
			clk.Advance(time.Second)
		}
		if ok, err := st.MarkDead(ctx, testOwner, "b-1", "poison"); !ok || err != nil {
			t.Fatalf("MarkDead: %v %v", ok, err)
		}
		if ok, err := st.MarkRetry(ctx, testOwner, "w-1", t0.Add(time.Hour), t0.Add(2*time.Hour), "failed"); !ok || err != nil {
			t.Fatalf("MarkRetry: %v %v", ok, err)
		}
		clk.Set(t0.Add(10 * time.Minute))
		check := func(what string, want time.Time) {
			t.Helper()
			due, err := st.FirstDue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sameTime(t, "FirstDue "+what, due, want)
			stats, err := st.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantLag := time.Duration(0)
			if !want.IsZero() {
				wantLag = max(0, clk.Now().Sub(want))
			}
			if stats.Lag < wantLag-time.Millisecond || stats.Lag > wantLag+time.Millisecond {
				t.Errorf("Lag %s = %v, want %v", what, stats.Lag, wantLag)
			}
			sameTime(t, "OldestPending "+what, stats.OldestPending, micro(t0.Add(time.Second))) // b-2, waiting or not
		}
		check("with a blocked key and a key waiting for a retry", micro(t0.Add(time.Hour))) // w-1's retry
		insert(t, st, build(t, core.NewEvent("Plain").ID("p-1").PayloadJSONString(`{}`)))
		check("with an unordered event due", micro(clk.Now()))
		if ok, err := markDone(ctx, st, "p-1"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := markDone(ctx, st, "w-1"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		check("once the retried event is DONE", micro(t0.Add(3*time.Second))) // w-2
	})

	t.Run("StatsOfEmptyTable", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		stats, err := st.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !stats.OldestPending.IsZero() || stats.Lag != 0 || len(stats.DeadByType) != 0 {
			t.Errorf("empty table stats: %+v", stats)
		}
	})

	t.Run("ListDeadFiltersAndPages", func(t *testing.T) {
		t.Parallel()
		st, _ := s.opsFixture(t)
		ctx := t.Context()
		list := func(f jdbcstore.DeadFilter, after string, limit int) []string {
			t.Helper()
			recs, err := st.ListDead(ctx, f, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Status != core.StatusDead || r.LastError == "" {
					t.Errorf("%s: status %v last_error %q", r.ID, r.Status, r.LastError)
				}
			}
			return ids(recs)
		}
		sameIDs(t, "all", list(jdbcstore.DeadFilter{}, "", 10), []string{"a-0", "a-1", "a-2", "b-0"})
		sameIDs(t, "page 1", list(jdbcstore.DeadFilter{}, "", 3), []string{"a-0", "a-1", "a-2"})
		sameIDs(t, "page 2", list(jdbcstore.DeadFilter{}, "a-2", 3), []string{"b-0"})
		sameIDs(t, "type B", list(jdbcstore.DeadFilter{EventType: "B"}, "", 10), []string{"b-0"})
		sameIDs(t, "tenant t1", list(jdbcstore.DeadFilter{TenantID: "t1"}, "", 10), []string{"a-0", "a-1"})
		sameIDs(t, "created in [t0+1s, t0+3s)", list(jdbcstore.DeadFilter{From: t0.Add(time.Second), To: t0.Add(3 * time.Second)}, "", 10), []string{"a-1", "a-2"})
		sameIDs(t, "ids (DEAD only)", list(jdbcstore.DeadFilter{IDs: []string{"a-2", "n-0", "nope"}}, "", 10), []string{"a-2"})
		// Bounds past the years a row's times can have: RFC 3339 takes
		// 9999-12-31T23:59:59-05:00, in the year 10000 in UTC (MySQL
		// compared it as text, before every date, and a discard by it
		// took every DEAD event).
		past := time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("-05:00", -5*3600))
		before := time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)
		sameIDs(t, "created after the year 9999", list(jdbcstore.DeadFilter{From: past}, "", 10), nil)
		sameIDs(t, "created before the year 10000", list(jdbcstore.DeadFilter{To: past}, "", 10), []string{"a-0", "a-1", "a-2", "b-0"})
		sameIDs(t, "created since the year 0", list(jdbcstore.DeadFilter{From: before}, "", 10), []string{"a-0", "a-1", "a-2", "b-0"})
		sameIDs(t, "created before the year 1", list(jdbcstore.DeadFilter{To: before}, "", 10), nil)
		if res, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{From: past}, jdbcstore.DiscardOptions{}); err != nil || res.Discarded != 0 {
			t.Errorf("discard of the events created after the year 9999 = %+v, %v; want none", res, err)
		}
		sameIDs(t, "all, after the discard", list(jdbcstore.DeadFilter{}, "", 10), []string{"a-0", "a-1", "a-2", "b-0"})
		for _, bad := range []int{0, -1, jdbcstore.MaxListLimit + 1} {
			if _, err := st.ListDead(ctx, jdbcstore.DeadFilter{}, "", bad); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("limit %d: err %v", bad, err)
			}
		}
	})

	t.Run("ReplayMovesExactlyTheSelectedDeadRows", func(t *testing.T) {
		t.Parallel()
		st, clk := s.opsFixture(t)
		ctx := t.Context()
		clk.Set(t0.Add(time.Hour))
		dry, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{EventType: "A"}, jdbcstore.ReplayOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if dry.Matched != 3 || dry.Replayed != 0 || !slices.Equal(dry.IDs, []string{"a-0", "a-1", "a-2"}) {
			t.Fatalf("dry run = %+v", dry)
		}
		if get(t, st, "a-0").Status != core.StatusDead {
			t.Fatal("dry run changed a row")
		}
		res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{EventType: "A"}, jdbcstore.ReplayOptions{BatchSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Matched != 3 || res.Replayed != 3 {
			t.Fatalf("replay = %+v", res)
		}
		for _, id := range []string{"a-0", "a-1", "a-2"} {
			r := get(t, st, id)
			if r.Status != core.StatusNew || r.Attempts != 0 || r.LastError != "" || r.LockedBy != "" || !r.DoneAt.IsZero() {
				t.Errorf("%s after replay: %+v", id, r)
			}
			sameTime(t, id+" AvailableAt", r.AvailableAt, micro(t0.Add(time.Hour)))
		}
		for id, want := range map[string]core.Status{"b-0": core.StatusDead, "n-0": core.StatusNew, "r-0": core.StatusRetry, "d-0": core.StatusDone} {
			if got := get(t, st, id).Status; got != want {
				t.Errorf("%s: %v, want %v (untouched)", id, got, want)
			}
		}
		// Replayed rows are claimable again.
		now := t0.Add(time.Hour)
		recs, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: "node-x", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range recs {
			got[r.ID] = true
		}
		for _, id := range []string{"a-0", "a-1", "a-2"} {
			if !got[id] {
				t.Errorf("replayed %s not claimable", id)
			}
		}
	})

	t.Run("ReplayNeedsAFilterOrAll", func(t *testing.T) {
		t.Parallel()
		st, _ := s.opsFixture(t)
		ctx := t.Context()
		if _, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("empty filter without All: err %v", err)
		}
		if _, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true, BatchSize: -1}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("BatchSize -1: err %v", err)
		}
		res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true})
		if err != nil || res.Replayed != 4 {
			t.Fatalf("replay all: %+v %v", res, err)
		}
		res, err = st.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{"b-0"}}, jdbcstore.ReplayOptions{})
		if err != nil || res.Matched != 0 {
			t.Fatalf("second replay of b-0: %+v %v, want nothing matched", res, err)
		}
	})

	// Text no row can hold (invalid UTF-8, a NUL) matches nothing on
	// every database: PostgreSQL refused it as a parameter, so a lookup
	// failed there where the others found nothing.
	t.Run("UnstorableTextMatchesNothing", func(t *testing.T) {
		t.Parallel()
		st, _ := s.opsFixture(t)
		ctx := t.Context()
		for _, id := range []string{"\xff", "a-\x000"} {
			if _, err := st.Get(ctx, id); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
			}
		}
		if got, err := st.Statuses(ctx, []string{"\xff", "a-0", "a\x00"}); err != nil || len(got) != 1 || got["a-0"] != core.StatusDead {
			t.Errorf("Statuses = %v, %v; want only a-0 DEAD", got, err)
		}
		for _, f := range []jdbcstore.DeadFilter{{EventType: "A\xff"}, {TenantID: "t\x001"}, {IDs: []string{"\xff"}}} {
			if recs, err := st.ListDead(ctx, f, "", 10); err != nil || len(recs) != 0 {
				t.Errorf("ListDead(%+v) = %d rows, %v; want none", f, len(recs), err)
			}
		}
		res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{"\xff", "a-1", "b\x00"}}, jdbcstore.ReplayOptions{})
		if err != nil || res.Replayed != 1 || !slices.Equal(res.IDs, []string{"a-1"}) {
			t.Fatalf("replay = %+v, %v; want a-1 replayed", res, err)
		}
		dis, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{IDs: []string{"\xff"}}, jdbcstore.DiscardOptions{})
		if err != nil || dis.Matched != 0 {
			t.Fatalf("discard = %+v, %v; want nothing matched", dis, err)
		}
	})

	t.Run("DeadOpsTakeAnyNumberOfIDs", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		// 70,000 ids, more placeholders than any database takes in one
		// statement, given out of order and some twice. Among them: DEAD
		// rows of type A spread over the list, one of type B, a NEW one;
		// a DEAD row outside the list.
		const n = 70000
		id := func(i int) string { return fmt.Sprintf("m-%05d", i) }
		list := make([]string, 0, n+3)
		for i := n - 1; i >= 0; i-- {
			list = append(list, id(i))
		}
		list = append(list, id(1000), id(69999), id(3))
		deadA := []string{id(3), id(999), id(1000), id(1001), id(35000), id(69999)}
		add := func(id, typ string, dead bool) {
			insert(t, st, build(t, core.NewEvent(typ).ID(id).PayloadJSONString(`{}`)))
			if dead {
				if ok, err := st.MarkDead(ctx, testOwner, id, "poison"); !ok || err != nil {
					t.Fatalf("MarkDead %s: %v %v", id, ok, err)
				}
			}
		}
		for _, id := range deadA {
			add(id, "A", true)
		}
		add(id(50000), "B", true)
		add(id(60000), "A", false)
		add("outside", "A", true)
		all := append(slices.Clone(deadA[:5]), id(50000), id(69999))
		f := jdbcstore.DeadFilter{IDs: list}

		recs, err := st.ListDead(ctx, f, "", 10)
		if err != nil {
			t.Fatalf("ListDead: %v", err)
		}
		sameIDs(t, "ListDead", ids(recs), all)
		var paged []string
		for after := ""; ; {
			recs, err := st.ListDead(ctx, f, after, 2)
			if err != nil {
				t.Fatalf("ListDead after %q: %v", after, err)
			}
			if len(recs) == 0 {
				break
			}
			paged = append(paged, ids(recs)...)
			after = recs[len(recs)-1].ID
		}
		sameIDs(t, "ListDead pages of 2", paged, all)

		dry, err := st.ReplayDead(ctx, f, jdbcstore.ReplayOptions{DryRun: true, BatchSize: 2})
		if err != nil || dry.Matched != len(all) || dry.Replayed != 0 {
			t.Fatalf("dry replay = %+v %v", dry, err)
		}
		sameIDs(t, "dry replay", dry.IDs, all)
		fa := f
		fa.EventType = "A"
		res, err := st.ReplayDead(ctx, fa, jdbcstore.ReplayOptions{BatchSize: 2})
		if err != nil || res.Matched != len(deadA) || res.Replayed != len(deadA) {
			t.Fatalf("replay = %+v %v, want %d matched and replayed", res, err, len(deadA))
		}
		sameIDs(t, "replayed", res.IDs, deadA)
		for _, id := range deadA {
			if got := get(t, st, id).Status; got != core.StatusNew {
				t.Errorf("%s after replay: %v, want NEW", id, got)
			}
		}
		disc, err := st.DiscardDead(ctx, f, jdbcstore.DiscardOptions{BatchSize: 1})
		if err != nil || disc.Matched != 1 || disc.Discarded != 1 {
			t.Fatalf("discard = %+v %v, want the B row", disc, err)
		}
		sameIDs(t, "discarded", disc.IDs, []string{id(50000)})
		if got := get(t, st, "outside").Status; got != core.StatusDead {
			t.Errorf("the DEAD row outside the list: %v, want DEAD", got)
		}
		if got := get(t, st, id(60000)).Status; got != core.StatusNew {
			t.Errorf("the NEW row in the list: %v, want NEW", got)
		}
	})

	t.Run("PurgeRemovesOnlyRowsPastRetentionInBatches", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		// 5 DONE and 3 DEAD finished at t0 (old); 2 DONE and 1 DEAD at
		// t0+2h (recent); NEW and RETRY rows created at t0 (old).
		finish := func(prefix string, n int, dead bool) {
			for i := range n {
				id := fmt.Sprintf("%s-%d", prefix, i)
				insert(t, st, jsonEvent(t, id))
				var err error
				if dead {
					_, err = st.MarkDead(ctx, testOwner, id, "x")
				} else {
					_, err = markDone(ctx, st, id)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		insert(t, st, jsonEvent(t, "new-old"))
		insert(t, st, jsonEvent(t, "retry-old"))
		if _, err := st.MarkRetry(ctx, testOwner, "retry-old", t0, testLease.Until, "x"); err != nil {
			t.Fatal(err)
		}
		finish("done-old", 5, false)
		finish("dead-old", 3, true)
		clk.Set(t0.Add(2 * time.Hour))
		finish("done-new", 2, false)
		finish("dead-new", 1, true)
		finish("legacy-new", 1, true)
		clk.Set(t0.Add(3 * time.Hour))
		// DEAD rows written before DEAD rows carried done_at age from
		// created_at: dead-old-0 (created at t0) is past retention,
		// legacy-new-0 (created at t0+2h) is not.
		for _, id := range []string{"dead-old-0", "legacy-new-0"} {
			if _, err := st.DB().ExecContext(ctx, sqlx.Rebind(st.Dialect().BindType(), "UPDATE "+st.Dialect().QuoteIdent(st.Table())+
				" SET done_at = NULL WHERE event_id = ?"), id); err != nil {
				t.Fatal(err)
			}
		}
		opts := jdbcstore.PurgeOptions{DoneOlderThan: 2 * time.Hour, DeadOlderThan: 150 * time.Minute, BatchSize: 2}

		opts.DryRun = true
		dry, err := st.Purge(ctx, opts)
		if err != nil || dry.Done != 5 || dry.Dead != 3 {
			t.Fatalf("dry run = %+v %v, want 5 DONE 3 DEAD", dry, err)
		}
		if c, _ := st.CountByStatus(ctx); c[core.StatusDone] != 7 {
			t.Fatal("dry run removed rows")
		}
		opts.DryRun = false
		res, err := st.Purge(ctx, opts)
		if err != nil || res.Done != 5 || res.Dead != 3 {
			t.Fatalf("purge = %+v %v, want 5 DONE 3 DEAD", res, err)
		}
		// Batches of 2: DONE 2+2+1, DEAD with done_at 2, DEAD without
		// done_at 1 = 5 statements; a store that reads and deletes a batch
		// in one statement runs one more to find the DEAD rows with done_at
		// exhausted after a full batch.
		if res.Batches < 5 || res.Batches > 6 {
			t.Errorf("Batches = %d, want 5 or 6 (batch size 2)", res.Batches)
		}
		c, err := st.CountByStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[core.Status]int{core.StatusNew: 1, core.StatusRetry: 1, core.StatusDone: 2, core.StatusDead: 2}
		for k, v := range want {
			if c[k] != v {
				t.Errorf("after purge %v = %d, want %d", k, c[k], v)
			}
		}
		if _, err := st.Get(ctx, "legacy-new-0"); err != nil {
			t.Errorf("the recent DEAD row without done_at was purged: %v", err)
		}
		// Nothing left past retention: a second run deletes nothing, with at
		// most one (empty) statement per status.
		if again, err := st.Purge(ctx, opts); err != nil || again.Done+again.Dead != 0 || again.Batches > 2 {
			t.Errorf("second purge = %+v %v, want nothing", again, err)
		}
		for _, bad := range []jdbcstore.PurgeOptions{{DoneOlderThan: -time.Second}, {DeadOlderThan: -1}, {DoneOlderThan: time.Hour, BatchSize: -1},
			{DoneOlderThan: time.Hour, BatchSize: jdbcstore.MaxPurgeBatch + 1}, {DoneOlderThan: time.Hour, PauseFactor: -1},
			{DoneOlderThan: time.Hour, PauseFactor: math.NaN()}, {DoneOlderThan: time.Hour, PauseFactor: jdbcstore.MaxPauseFactor + 1},
			{DoneOlderThan: time.Hour, MaxRate: -1}, {DoneOlderThan: time.Hour, MaxRate: math.NaN()}} {
			if _, err := st.Purge(ctx, bad); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("%+v: err %v", bad, err)
			}
		}
	})
	// Rows finished before 1970 (a clock set back, rows imported) are
	// past any retention: the page reads of MySQL/MariaDB and PostgreSQL
	// started at the Unix epoch, so the dry run counted them and the
	// purge removed none.
	t.Run("PurgeRemovesRowsFinishedBefore1970", func(t *testing.T) {
		t.Parallel()
		clk := newClock(time.Date(1969, 12, 31, 12, 0, 0, 0, time.UTC))
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		insert(t, st, jsonEvent(t, "done-1969"))
		insert(t, st, jsonEvent(t, "dead-1969"))
		if ok, err := markDone(ctx, st, "done-1969"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := st.MarkDead(ctx, testOwner, "dead-1969", "x"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		clk.Set(t0)
		opts := jdbcstore.PurgeOptions{DoneOlderThan: time.Hour, DeadOlderThan: time.Hour}
		res, err := st.Purge(ctx, opts)
		if err != nil || res.Done != 1 || res.Dead != 1 {
			t.Fatalf("purge = %+v %v, want 1 DONE and 1 DEAD", res, err)
		}
	})
}
