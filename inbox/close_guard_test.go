package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
)

// Close called by a handler with its own context returns ErrCloseInHandler
// at once and closes nothing (it used to wait for that handler, so for
// itself, until the handler's timeout); the handler then finishes, its
// message is Done, and the dispatcher goes on handling.
func TestCloseFromHandler(t *testing.T) {
	e := newEnv(t, openSQLite, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Workers: 1, PollInterval: time.Millisecond, HandlerTimeout: 20 * time.Second})
	closed := make(chan error, 1)
	mustHandle(t, d, "close", func(ctx context.Context, _ inbox.Record) error {
		closed <- d.Close(ctx)
		return nil
	})
	mustHandle(t, d, "ok", func(context.Context, inbox.Record) error { return nil })
	e.start(d)
	e.enqueue(inbox.Message{Source: "s", MessageID: "closer", Topic: "close"})
	select {
	case err := <-closed:
		if !errors.Is(err, inbox.ErrCloseInHandler) {
			t.Fatalf("Close from a handler = %v, want ErrCloseInHandler", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close from a handler blocked")
	}
	waitFor(t, "the closing handler's message Done", func() bool { return e.status("s", "closer") == inbox.StatusDone })
	e.enqueue(inbox.Message{Source: "s", MessageID: "next", Topic: "ok"})
	waitFor(t, "the next message Done: the dispatcher was not closed", func() bool { return e.status("s", "next") == inbox.StatusDone })
	if d.InHandler(context.Background()) {
		t.Error("InHandler(context.Background()) = true")
	}
}
