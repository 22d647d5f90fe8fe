package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// Every method of an Inbox and of a Dispatcher that takes a context
// refuses a nil one with core.ErrNilContext before anything runs. A nil
// context that reached database/sql panicked while the pool's lock was
// held, and every later use of the pool (the dispatcher's claims, Close,
// the pool's own Close) then waited for ever.
func TestNilContextIsRefused(t *testing.T) {
	e := newEnv(t, openSQLite, inbox.Config{})
	if n := testsupport.RefusesNilContext(t, e.in); n < 18 {
		t.Errorf("Inbox: called %d methods with a nil context, want every one taking a context (18 or more)", n)
	}
	d := e.dispatcher(inbox.DispatcherConfig{})
	if n := testsupport.RefusesNilContext(t, d); n < 4 {
		t.Errorf("Dispatcher: called %d methods with a nil context, want 4 or more (Start, Close, RunOnce, RemoveInbox)", n)
	}
	done := make(chan error, 1)
	go func() {
		if err := e.in.Enqueue(context.Background(), inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte(`{}`)}); err != nil {
			done <- err
			return
		}
		_, err := e.in.Get(context.Background(), "s", "m")
		done <- err
	}()
	if err := testsupport.Recv(t, 10*time.Second, done, "the inbox after the nil-context calls (its pool is stuck)"); err != nil {
		t.Fatalf("Get after the refusals: %v", err)
	}
	e.start(d) // a refused Close closed nothing
}
