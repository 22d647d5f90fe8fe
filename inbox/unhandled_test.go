package inbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
)

// A message whose topic has no handler is put off for UnhandledDelay with
// its attempt given back, however many times it comes round: it went
// Dead after MaxAttempts claims (an ERROR said its handler failed), and a
// handler added later, as the docs allow, never got it.
func TestUnhandledMessageWaitsForItsHandler(t *testing.T) {
	e := newEnv(t, openSQLite, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", MaxAttempts: 2, UnhandledDelay: time.Minute})
	e.enqueue(inbox.Message{Source: "s", MessageID: "m", Topic: "later"})
	for i := range 4 {
		if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
			t.Fatalf("claim %d: RunOnce = %d, %v; want 1", i+1, n, err)
		}
		rec := e.get("s", "m")
		if rec.Status == inbox.StatusDead || rec.Attempt != 0 || !strings.Contains(rec.LastError, "no handler") ||
			!rec.NextAttemptAt.Equal(e.clock.Now().Add(time.Minute)) {
			t.Fatalf("after claim %d: status %v, attempt %d, last error %q, next attempt at %v; want it put off for 1 min, attempt 0",
				i+1, rec.Status, rec.Attempt, rec.LastError, rec.NextAttemptAt)
		}
		if n, err := d.RunOnce(e.ctx); err != nil || n != 0 {
			t.Fatalf("claimed again before UnhandledDelay: RunOnce = %d, %v", n, err)
		}
		e.clock.Advance(time.Minute)
	}
	if n := e.logs.Count("level=ERROR"); n != 0 {
		t.Errorf("%d ERROR lines for a message without a handler:\n%s", n, e.logs.String())
	}
	mustHandle(t, d, "later", func(context.Context, inbox.Record) error { return nil })
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce with the handler = %d, %v", n, err)
	}
	if rec := e.get("s", "m"); rec.Status != inbox.StatusDone || rec.Attempt != 1 {
		t.Errorf("handled: status %v, attempt %d; want Done at attempt 1", rec.Status, rec.Attempt)
	}
}
