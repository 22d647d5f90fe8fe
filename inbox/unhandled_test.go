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

// A message put off for want of a handler is reported Redelivered at its
// later claims: its Attempt is 1 again (no attempt was charged), and the
// observers, which measure first handlings (the wait since Enqueue),
// counted its wait once per claim (16 samples for one message).
func TestUnhandledMessageIsRedeliveredToTheObserver(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", UnhandledDelay: time.Minute})
	e.enqueue(inbox.Message{Source: "s", MessageID: "m", Topic: "later"})
	for i := range 3 {
		if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
			t.Fatalf("claim %d: RunOnce = %d, %v", i+1, n, err)
		}
		e.clock.Advance(time.Minute)
	}
	mustHandle(t, d, "later", func(context.Context, inbox.Record) error { return nil })
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce with the handler = %d, %v", n, err)
	}
	all := rec.all()
	if len(all) != 4 {
		t.Fatalf("%d processings observed, want 4", len(all))
	}
	for i, o := range all {
		if want := i > 0; o.msg.Attempt != 1 || o.msg.Redelivered != want {
			t.Errorf("processing %d: attempt %d, redelivered %v; want 1, %v", i+1, o.msg.Attempt, o.msg.Redelivered, want)
		}
	}
}

// One WARN per topic without a handler, however many of its messages come
// round: one rate-limited WARN for every topic together named only the
// first topics it happened to see.
func TestUnhandledTopicsAreWarnedAboutOnceEach(t *testing.T) {
	e := newEnv(t, openSQLite, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", UnhandledDelay: time.Minute})
	for _, topic := range []string{"a", "b", "c"} {
		for i := range 3 {
			e.enqueue(inbox.Message{Source: "s", MessageID: topic + strings.Repeat("x", i), Topic: topic})
		}
	}
	for range 2 {
		for {
			n, err := d.RunOnce(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		e.clock.Advance(time.Minute)
	}
	for _, topic := range []string{"a", "b", "c"} {
		if n := e.logs.Count("level=WARN", "no handler for the topic", "topic="+topic); n != 1 {
			t.Errorf("%d WARN lines for topic %s, want 1:\n%s", n, topic, e.logs.String())
		}
	}
}
