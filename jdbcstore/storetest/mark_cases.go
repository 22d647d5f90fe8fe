package storetest

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

func (s *suite) testMarkDone(t *testing.T) {
	t.Run("SetsDoneAndIsIdempotent", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		env := jsonEvent(t, "evt-done")
		insert(t, st, env)

		clk.Advance(5 * time.Second)
		ok, err := markDone(ctx, st, env.ID())
		mark(t, "first MarkDone", true, ok, err)
		rec := get(t, st, env.ID())
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("Status, Attempts = %v, %d, want DONE, 0", rec.Status, rec.Attempts)
		}
		sameTime(t, "DoneAt", rec.DoneAt, micro(t0.Add(5*time.Second)))
		sameTime(t, "CreatedAt", rec.CreatedAt, micro(t0))

		clk.Advance(time.Minute)
		ok, err = markDone(ctx, st, env.ID())
		mark(t, "second MarkDone", false, ok, err)
		sameTime(t, "DoneAt after second MarkDone", get(t, st, env.ID()).DoneAt, micro(t0.Add(5*time.Second)))
	})

	t.Run("UnknownIDChangesNothing", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := t.Context()
		insert(t, st, jsonEvent(t, "evt-known"))
		ok, err := markDone(ctx, st, "evt-unknown")
		mark(t, "MarkDone(unknown)", false, ok, err)
		ok, err = st.MarkRetry(ctx, testOwner, "evt-unknown", t0, testLease.Until, "x")
		mark(t, "MarkRetry(unknown)", false, ok, err)
		ok, err = st.MarkDead(ctx, testOwner, "evt-unknown", "x")
		mark(t, "MarkDead(unknown)", false, ok, err)
		if rec := get(t, st, "evt-known"); rec.Status != core.StatusNew {
			t.Errorf("other row status = %v, want NEW", rec.Status)
		}
	})
}

func (s *suite) testMarkRetry(t *testing.T) {
	t.Run("IncrementsAttemptsAndReschedules", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		ctx := t.Context()
		env := jsonEvent(t, "evt-retry")
		insert(t, st, env)

		next1 := t0.Add(200*time.Millisecond + 999*time.Nanosecond)
		ok, err := st.MarkRetry(ctx, testOwner, env.ID(), next1, testLease.Until, "boom 1")
		mark(t, "MarkRetry 1", true, ok, err)
		rec := get(t, st, env.ID())
		if rec.Status != core.StatusRetry || rec.Attempts != 1 || rec.LastError != "boom 1" {
			t.Errorf("after 1: Status, Attempts, LastError = %v, %d, %q; want RETRY, 1, boom 1", rec.Status, rec.Attempts, rec.LastError)
		}
		sameTime(t, "AvailableAt after 1", rec.AvailableAt, micro(next1))

		next2 := t0.Add(3 * time.Second).In(time.FixedZone("PST", -8*3600))
		ok, err = st.MarkRetry(ctx, testOwner, env.ID(), next2, testLease.Until, "boom 2")
		mark(t, "MarkRetry 2", true, ok, err)
		rec = get(t, st, env.ID())
		if rec.Status != core.StatusRetry || rec.Attempts != 2 || rec.LastError != "boom 2" {
			t.Errorf("after 2: Status, Attempts, LastError = %v, %d, %q; want RETRY, 2, boom 2", rec.Status, rec.Attempts, rec.LastError)
		}
		sameTime(t, "AvailableAt after 2", rec.AvailableAt, micro(next2))
		sameTime(t, "CreatedAt", rec.CreatedAt, micro(t0))
		if !rec.DoneAt.IsZero() {
			t.Errorf("DoneAt = %s, want zero", rec.DoneAt)
		}
		sameEnvelope(t, rec, env)
	})
}

func (s *suite) testMarkDead(t *testing.T) {
	t.Run("FromNew", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		env := jsonEvent(t, "evt-dead-new")
		insert(t, st, env)
		ok, err := st.MarkDead(t.Context(), testOwner, env.ID(), "poison: cannot decode")
		mark(t, "MarkDead", true, ok, err)
		rec := get(t, st, env.ID())
		if rec.Status != core.StatusDead || rec.Attempts != 1 || rec.LastError != "poison: cannot decode" {
			t.Errorf("Status, Attempts, LastError = %v, %d, %q; want DEAD, 1, poison...", rec.Status, rec.Attempts, rec.LastError)
		}
		sameTime(t, "AvailableAt", rec.AvailableAt, micro(t0))
		// done_at records when the event finished, DEAD included (retention).
		sameTime(t, "DoneAt", rec.DoneAt, micro(t0))
	})

	t.Run("AfterRetriesCountsEveryFailure", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		ctx := t.Context()
		env := jsonEvent(t, "evt-dead-retried")
		insert(t, st, env)
		for i := range 3 {
			ok, err := st.MarkRetry(ctx, testOwner, env.ID(), t0.Add(time.Duration(i+1)*time.Second), testLease.Until, "transient")
			mark(t, "MarkRetry", true, ok, err)
		}
		ok, err := st.MarkDead(ctx, testOwner, env.ID(), "gave up")
		mark(t, "MarkDead", true, ok, err)
		rec := get(t, st, env.ID())
		if rec.Status != core.StatusDead || rec.Attempts != 4 || rec.LastError != "gave up" {
			t.Errorf("Status, Attempts, LastError = %v, %d, %q; want DEAD, 4, gave up", rec.Status, rec.Attempts, rec.LastError)
		}
		sameTime(t, "AvailableAt", rec.AvailableAt, micro(t0.Add(3*time.Second)))
	})
}

func (s *suite) testPostpone(t *testing.T) {
	t.Run("KeepsStatusAndAttemptsReleasesLease", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		ctx := t.Context()
		fresh, retried := jsonEvent(t, "evt-postpone-new"), jsonEvent(t, "evt-postpone-retry")
		insert(t, st, fresh)
		insert(t, st, retried)
		ok, err := st.MarkRetry(ctx, testOwner, retried.ID(), t0, testLease.Until, "transient")
		mark(t, "MarkRetry", true, ok, err)
		later := t0.Add(time.Minute)
		for _, c := range []struct {
			id       string
			status   core.Status
			attempts int
		}{{fresh.ID(), core.StatusNew, 0}, {retried.ID(), core.StatusRetry, 1}} {
			ok, err := st.Postpone(ctx, testOwner, c.id, later, "no listener")
			mark(t, "Postpone "+c.id, true, ok, err)
			rec := get(t, st, c.id)
			if rec.Status != c.status || rec.Attempts != c.attempts || rec.LastError != "no listener" {
				t.Errorf("%s: Status, Attempts, LastError = %v, %d, %q; want %v, %d, no listener",
					c.id, rec.Status, rec.Attempts, rec.LastError, c.status, c.attempts)
			}
			if rec.LockedBy != "" || !rec.LockedUntil.IsZero() {
				t.Errorf("%s: Postpone kept the lease %q/%v", c.id, rec.LockedBy, rec.LockedUntil)
			}
			sameTime(t, "AvailableAt", rec.AvailableAt, micro(later))
		}
	})

	t.Run("FencedOnOwnerAndDone", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, newClock(t0), jdbcstore.Config{})
		ctx := t.Context()
		env, done := jsonEvent(t, "evt-postpone-fenced"), jsonEvent(t, "evt-postpone-done")
		insert(t, st, env)
		insert(t, st, done)
		ok, err := st.Postpone(ctx, "someone-else", env.ID(), t0.Add(time.Minute), "x")
		mark(t, "Postpone by another owner", false, ok, err)
		ok, err = markDone(ctx, st, done.ID())
		mark(t, "MarkDone", true, ok, err)
		ok, err = st.Postpone(ctx, testOwner, done.ID(), t0.Add(time.Minute), "x")
		mark(t, "Postpone of a DONE row", false, ok, err)
		if rec := get(t, st, env.ID()); rec.LockedBy != testOwner || rec.LastError != "" {
			t.Errorf("fenced Postpone changed the row: locked_by %q last_error %q", rec.LockedBy, rec.LastError)
		}
		if rec := get(t, st, done.ID()); rec.Status != core.StatusDone {
			t.Errorf("DONE row became %v", rec.Status)
		}
	})
}

func (s *suite) testDoneRowIsFinal(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	st := s.newStore(t, clk, jdbcstore.Config{})
	ctx := t.Context()
	env := jsonEvent(t, "evt-final")
	insert(t, st, env)
	ok, err := st.MarkRetry(ctx, testOwner, env.ID(), t0.Add(time.Second), testLease.Until, "first failure")
	mark(t, "MarkRetry before done", true, ok, err)
	clk.Advance(2 * time.Second)
	ok, err = markDone(ctx, st, env.ID())
	mark(t, "MarkDone", true, ok, err)
	before := get(t, st, env.ID())

	clk.Advance(time.Hour)
	ok, err = st.MarkRetry(ctx, testOwner, env.ID(), t0.Add(time.Hour), testLease.Until, "late failure")
	mark(t, "MarkRetry on DONE", false, ok, err)
	ok, err = st.MarkDead(ctx, testOwner, env.ID(), "late death")
	mark(t, "MarkDead on DONE", false, ok, err)
	ok, err = markDone(ctx, st, env.ID())
	mark(t, "MarkDone on DONE", false, ok, err)

	after := get(t, st, env.ID())
	if after.Status != core.StatusDone || after.Attempts != before.Attempts || after.LastError != before.LastError {
		t.Errorf("DONE row changed: Status, Attempts, LastError = %v, %d, %q; want DONE, %d, %q",
			after.Status, after.Attempts, after.LastError, before.Attempts, before.LastError)
	}
	sameTime(t, "AvailableAt", after.AvailableAt, before.AvailableAt)
	sameTime(t, "DoneAt", after.DoneAt, before.DoneAt)
	if ids, _ := poll(t, st, t0.Add(48*time.Hour), 0, 10); len(ids) != 0 {
		t.Errorf("DONE row polled: %q", ids)
	}
}

func (s *suite) testLastError(t *testing.T) {
	// check stores msg through MarkRetry and MarkDead and compares what
	// is read back with want.
	check := func(t *testing.T, st *jdbcstore.Store, id, msg, want string) {
		t.Helper()
		ctx := t.Context()
		insert(t, st, jsonEvent(t, id+"-r"))
		insert(t, st, jsonEvent(t, id+"-d"))
		ok, err := st.MarkRetry(ctx, testOwner, id+"-r", t0, testLease.Until, msg)
		mark(t, "MarkRetry", true, ok, err)
		ok, err = st.MarkDead(ctx, testOwner, id+"-d", msg)
		mark(t, "MarkDead", true, ok, err)
		for _, rid := range []string{id + "-r", id + "-d"} {
			got := get(t, st, rid).LastError
			if !utf8.ValidString(got) {
				t.Errorf("%s: LastError is not valid UTF-8: %q", rid, got)
			}
			if got != want {
				t.Errorf("%s: LastError has %d characters (%d bytes), want %d characters (%d bytes); got prefix %.40q",
					rid, utf8.RuneCountInString(got), len(got), utf8.RuneCountInString(want), len(want), got)
			}
		}
	}

	t.Run("TruncatedTo4000Characters", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		cases := []struct{ id, msg, want string }{
			{"err-ascii-exact", strings.Repeat("a", 4000), strings.Repeat("a", 4000)},
			{"err-ascii-long", strings.Repeat("b", 4500), strings.Repeat("b", 4000)},
			{"err-2byte", strings.Repeat("é", 5000), strings.Repeat("é", 4000)},
			{"err-4byte", strings.Repeat("🙂", 4001), strings.Repeat("🙂", 4000)},
			{"err-boundary", strings.Repeat("c", 3999) + "日本語", strings.Repeat("c", 3999) + "日"},
			{"err-short", "connection refused", "connection refused"},
			{"err-empty", "", ""},
		}
		for _, c := range cases {
			check(t, st, c.id, c.msg, c.want)
		}
	})

	t.Run("InvalidUTF8Repaired", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		check(t, st, "err-invalid", "bad \xff\xfe bytes", "bad \uFFFD bytes")
	})

	t.Run("CustomMaxErrorLen", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{MaxErrorLen: 10})
		check(t, st, "err-custom-cjk", "日本語のエラーメッセージです", "日本語のエラーメッセ")
		check(t, st, "err-custom-emoji", strings.Repeat("💥", 20), strings.Repeat("💥", 10))
		check(t, st, "err-custom-short", "short", "short")
	})

	// The longest MaxErrorLen of 4-byte characters is stored whole on
	// every database (MySQL's TEXT: 65,535 bytes).
	t.Run("LongestMaxErrorLen", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{MaxErrorLen: jdbcstore.MaxMaxErrorLen})
		long := strings.Repeat("💥", jdbcstore.MaxMaxErrorLen)
		check(t, st, "err-longest", long+"!", long)
	})
}
