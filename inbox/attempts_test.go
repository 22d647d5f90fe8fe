package inbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
)

// Every claim charges an attempt, so a handling that ends without an
// outcome (its process died; here a worker claims and never settles) has
// used one, and Release gives it back. A message whose last attempt ended
// so is Dead at its next claim, without another run: a message that
// crashes the process handling it is not retried for ever. Attempts used
// to be charged only by the outcome, which a crash never writes.
func testCrashedHandlingCountsAnAttempt(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	e.enqueue(inbox.Message{Source: "s", MessageID: "poison", Topic: "t"})
	crash := func(attempt int) { // a node claims it, then dies: its lease expires
		t.Helper()
		recs := e.claim("doomed", time.Minute, 1)
		mustEqual(t, "claimed", len(recs), 1)
		mustEqual(t, "attempt of the claim", recs[0].Attempt, attempt)
		mustEqual(t, "stored attempt", e.get("s", "poison").Attempt, attempt)
		e.clock.Advance(2 * time.Minute)
	}
	crash(1)
	if n, err := e.in.ReapExpired(e.ctx); err != nil || n != 1 {
		t.Fatalf("reap = %d, %v; want 1", n, err)
	}
	mustEqual(t, "attempt after the reap", e.get("s", "poison").Attempt, 1)

	recs := e.claim("w", time.Minute, 1)
	mustEqual(t, "attempt of the second claim", recs[0].Attempt, 2)
	if n, err := e.in.Release(e.ctx, "w", []inbox.Key{recs[0].Key()}); err != nil || n != 1 {
		t.Fatalf("release = %d, %v; want 1", n, err)
	}
	mustEqual(t, "attempt after Release (given back)", e.get("s", "poison").Attempt, 1)

	crash(2) // claimed again over the expired lease, without a reap

	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", MaxAttempts: 2})
	ran := false
	mustHandle(t, d, "t", func(context.Context, inbox.Record) error { ran = true; return nil })
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1", n, err)
	}
	mustEqual(t, "handler ran", ran, false)
	rec := e.get("s", "poison")
	mustEqual(t, "status", rec.Status, inbox.StatusDead)
	mustEqual(t, "attempt (the claim that ran nothing is not counted)", rec.Attempt, 2)
	mustEqual(t, "lease", rec.LockedBy, "")
	if want := inbox.ErrAttemptsExhausted.Error(); !strings.HasPrefix(rec.LastError, want) {
		t.Fatalf("last error = %q, want it to start with %q", rec.LastError, want)
	}
	mustEqual(t, "dead log", e.logs.Count("level=ERROR", "Dead", "used up", "message_id=poison", "attempts=2"), 1)

	// A message that fails normally is Dead after MaxAttempts runs, as
	// before: each claim's attempt is the one its outcome records.
	e.enqueue(inbox.Message{Source: "s", MessageID: "fails", Topic: "f"})
	var seen []int
	mustHandle(t, d, "f", func(_ context.Context, rec inbox.Record) error {
		seen = append(seen, rec.Attempt)
		return errors.New("nope")
	})
	for range 2 {
		if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
			t.Fatalf("RunOnce = %d, %v; want 1", n, err)
		}
		e.clock.Advance(time.Minute)
	}
	rec = e.get("s", "fails")
	mustEqual(t, "status after MaxAttempts failures", rec.Status, inbox.StatusDead)
	mustEqual(t, "attempt", rec.Attempt, 2)
	mustEqual(t, "attempts seen", len(seen), 2)
	mustEqual(t, "first attempt seen", seen[0], 1)
}
