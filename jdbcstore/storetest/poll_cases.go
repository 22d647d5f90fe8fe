package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

func (s *suite) testPollPending(t *testing.T) {
	t.Run("OrderByAvailableAtThenCreatedAtThenID", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		at := func(d time.Duration, ids ...string) {
			clk.Set(t0.Add(d))
			for _, id := range ids {
				insert(t, st, jsonEvent(t, id))
			}
		}
		at(1*time.Second, "p-late")
		at(2*time.Second, "p-b", "p-a") // same created_at: id breaks the tie
		at(3*time.Second, "p-c")
		at(4*time.Second, "p-early")
		ok, err := st.MarkRetry(ctx, testOwner, "p-late", t0.Add(8*time.Second), testLease.Until, "later")
		mark(t, "MarkRetry p-late", true, ok, err)
		// Available at t0+2s like p-a and p-b, but created later.
		ok, err = st.MarkRetry(ctx, testOwner, "p-early", t0.Add(2*time.Second), testLease.Until, "sooner")
		mark(t, "MarkRetry p-early", true, ok, err)

		ids, recs := poll(t, st, t0.Add(10*time.Second), 0, 100)
		sameIDs(t, "poll order", ids, []string{"p-a", "p-b", "p-early", "p-c", "p-late"})
		r := recs[2]
		if r.Status != core.StatusRetry || r.Attempts != 1 || r.LastError != "sooner" {
			t.Errorf("p-early: Status, Attempts, LastError = %v, %d, %q", r.Status, r.Attempts, r.LastError)
		}
		sameTime(t, "p-early CreatedAt", r.CreatedAt, micro(t0.Add(4*time.Second)))
		sameTime(t, "p-early AvailableAt", r.AvailableAt, micro(t0.Add(2*time.Second)))

		ids, _ = poll(t, st, t0.Add(10*time.Second), 0, 2)
		sameIDs(t, "limit 2", ids, []string{"p-a", "p-b"})
		ids, _ = poll(t, st, t0.Add(10*time.Second), 0, 1)
		sameIDs(t, "limit 1", ids, []string{"p-a"})
		// At t0+3s only what is available by then.
		ids, _ = poll(t, st, t0.Add(3*time.Second), 0, 100)
		sameIDs(t, "now=t0+3s", ids, []string{"p-a", "p-b", "p-c"})
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		for _, limit := range []int{0, -1} {
			if _, err := st.PollPending(t.Context(), time.Now(), 0, limit); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("limit %d: err = %v, want ErrInvalidConfig", limit, err)
			}
		}
		if _, err := st.PollPending(t.Context(), time.Now(), -time.Second, 1); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("negative skipRecent: err = %v, want ErrInvalidConfig", err)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		if ids, _ := poll(t, st, time.Now(), 0, 10); len(ids) != 0 {
			t.Errorf("poll of empty table = %q", ids)
		}
	})

	t.Run("SkipRecent", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		for i, id := range []string{"s-0", "s-1", "s-2", "s-3"} {
			clk.Set(t0.Add(time.Duration(i) * time.Second))
			insert(t, st, jsonEvent(t, id))
		}
		now := t0.Add(3 * time.Second)
		cases := []struct {
			skip time.Duration
			want []string
		}{
			{0, []string{"s-0", "s-1", "s-2", "s-3"}},
			{time.Second, []string{"s-0", "s-1", "s-2"}}, // created_at == now-skip is included
			{time.Second + time.Microsecond, []string{"s-0", "s-1"}},
			{3 * time.Second, []string{"s-0"}},
			{10 * time.Second, nil},
		}
		for _, c := range cases {
			ids, _ := poll(t, st, now, c.skip, 10)
			sameIDs(t, "skipRecent "+c.skip.String(), ids, c.want)
		}
	})

	t.Run("FutureAvailableAtExcludedUntilDue", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		insert(t, st, jsonEvent(t, "f-later"))
		insert(t, st, jsonEvent(t, "f-now"))
		due := t0.Add(time.Minute)
		ok, err := st.MarkRetry(t.Context(), testOwner, "f-later", due, testLease.Until, "backoff")
		mark(t, "MarkRetry", true, ok, err)

		ids, _ := poll(t, st, t0.Add(time.Second), 0, 10)
		sameIDs(t, "before due", ids, []string{"f-now"})
		ids, _ = poll(t, st, due.Add(-time.Microsecond), 0, 10)
		sameIDs(t, "1µs before due", ids, []string{"f-now"})
		ids, recs := poll(t, st, due, 0, 10)
		sameIDs(t, "at due", ids, []string{"f-now", "f-later"})
		if recs[1].Status != core.StatusRetry || recs[1].Attempts != 1 {
			t.Errorf("f-later: Status, Attempts = %v, %d, want RETRY, 1", recs[1].Status, recs[1].Attempts)
		}
	})

	t.Run("DoneAndDeadExcluded", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		ctx := t.Context()
		for _, id := range []string{"x-new", "x-done", "x-retry", "x-dead"} {
			insert(t, st, jsonEvent(t, id))
		}
		ok, err := markDone(ctx, st, "x-done")
		mark(t, "MarkDone", true, ok, err)
		ok, err = st.MarkRetry(ctx, testOwner, "x-retry", t0, testLease.Until, "again")
		mark(t, "MarkRetry", true, ok, err)
		ok, err = st.MarkDead(ctx, testOwner, "x-dead", "dead")
		mark(t, "MarkDead", true, ok, err)
		ids, _ := poll(t, st, t0.Add(time.Hour), 0, 10)
		sameIDs(t, "pending", ids, []string{"x-new", "x-retry"})
	})

	t.Run("ReturnsFullRecords", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		envs := []core.Envelope{
			build(t, core.NewEvent("Full").ID("r-1").AggregateType("Cart").AggregateID("c-9").
				TenantID("t-1").Header("k", "v").OccurredAt(t0.Add(-time.Hour)).PayloadJSONString(`{"x":[1]}`)),
			build(t, core.NewEvent("Full").ID("r-2").PayloadBytes([]byte{0, 1, 2, 0xff})),
		}
		for _, env := range envs {
			insert(t, st, env)
		}
		_, recs := poll(t, st, t0, 0, 10)
		if len(recs) != len(envs) {
			t.Fatalf("polled %d records, want %d", len(recs), len(envs))
		}
		for i, rec := range recs {
			if rec.Status != core.StatusNew || rec.Attempts != 0 {
				t.Errorf("%s: Status, Attempts = %v, %d", rec.ID, rec.Status, rec.Attempts)
			}
			sameTime(t, rec.ID+" CreatedAt", rec.CreatedAt, micro(t0))
			sameTime(t, rec.ID+" AvailableAt", rec.AvailableAt, micro(t0))
			sameEnvelope(t, rec, envs[i])
		}
	})
}

func (s *suite) testCountByStatus(t *testing.T) {
	t.Parallel()
	st := s.newStore(t, newClock(t0), jdbcstore.Config{})
	ctx := t.Context()
	want := map[core.Status]int{core.StatusNew: 0, core.StatusDone: 0, core.StatusRetry: 0, core.StatusDead: 0}
	check := func(what string) {
		t.Helper()
		got := countsOf(t, st)
		for status, n := range want {
			if got[status] != n {
				t.Errorf("%s: count[%v] = %d, want %d (all: %v)", what, status, got[status], n, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: counts = %v, want exactly %v", what, got, want)
		}
	}
	check("empty")
	for _, id := range []string{"c-1", "c-2", "c-3", "c-4", "c-5", "c-6"} {
		insert(t, st, jsonEvent(t, id))
	}
	want[core.StatusNew] = 6
	check("inserted")
	for _, id := range []string{"c-1", "c-2"} {
		ok, err := markDone(ctx, st, id)
		mark(t, "MarkDone", true, ok, err)
	}
	ok, err := st.MarkRetry(ctx, testOwner, "c-3", t0, testLease.Until, "r")
	mark(t, "MarkRetry", true, ok, err)
	ok, err = st.MarkDead(ctx, testOwner, "c-4", "d")
	mark(t, "MarkDead", true, ok, err)
	want = map[core.Status]int{core.StatusNew: 2, core.StatusDone: 2, core.StatusRetry: 1, core.StatusDead: 1}
	check("after marks")
}

func (s *suite) testGet(t *testing.T) {
	t.Parallel()
	st := s.newStore(t, nil, jdbcstore.Config{})
	insert(t, st, jsonEvent(t, "g-known"))
	for _, id := range []string{"g-unknown", "", "G-KNOWN"} {
		if _, err := st.Get(t.Context(), id); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want ErrNotFound", id, err)
		}
	}
}
