package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
)

// A Close whose ctx ends gives the handlers it cancels StatusTimeout to
// return, and the leases of their messages are given back before it
// returns: a process that exits right after Close leaves nothing leased,
// and the next one takes the messages at once. (Before, Close returned as
// soon as it cancelled them, and each handler gave its message back
// whenever it returned, after Close: a process exiting then left the
// messages leased until Lease ended.)
func testDispatcherHardCloseGivesBack(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	entered := make(chan string, 2)
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Workers: 2, PollInterval: time.Hour})
	mustHandle(t, d, "t", func(ctx context.Context, rec inbox.Record) error {
		entered <- rec.MessageID
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // unwinding takes a moment
		return ctx.Err()
	})
	e.enqueue(inbox.Message{Source: "s", MessageID: "a", Topic: "t"})
	e.enqueue(inbox.Message{Source: "s", MessageID: "b", Topic: "t"})
	e.start(d)
	<-entered
	<-entered
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hard Close: %v", err)
	}
	for _, id := range []string{"a", "b"} {
		rec := e.get("s", id)
		if rec.LockedBy != "" || rec.Attempt != 0 {
			t.Errorf("message %s right after Close: leased to %q, attempt %d; want given back, no attempt charged", id, rec.LockedBy, rec.Attempt)
		}
	}
}
