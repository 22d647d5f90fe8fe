package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/retry"
)

// A dispatcher wakes by itself when a message it knows of becomes
// claimable, without waiting for its next poll (an hour here): the next
// attempt of a message whose handler failed, after the retry policy's
// delay, and a message enqueued through its inbox with a DueAt. Several
// such times are kept: the earlier retry does not make it forget the
// later due time. (Both waited for the next poll, up to PollInterval.)
func testDispatcherWakesWhenDue(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{Now: time.Now}) // the wall clock: the wake-ups are real
	const delay = 50 * time.Millisecond
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", PollInterval: time.Hour,
		Retry: retry.PolicyFunc(func(int) time.Duration { return delay })})
	type call struct {
		id      string
		attempt int
		at      time.Time
	}
	calls := make(chan call, 10)
	mustHandle(t, d, "t", func(_ context.Context, rec inbox.Record) error {
		calls <- call{rec.MessageID, rec.Attempt, time.Now()}
		if rec.MessageID == "retry" && rec.Attempt == 1 {
			return errors.New("downstream unavailable")
		}
		return nil
	})
	e.start(d)
	due := time.Now().Add(400 * time.Millisecond)
	e.enqueue(inbox.Message{Source: "s", MessageID: "due", Topic: "t", DueAt: due})
	e.enqueue(inbox.Message{Source: "s", MessageID: "retry", Topic: "t"})
	deadline := time.After(waitTimeout)
	var failedAt time.Time
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case c := <-calls:
			switch {
			case c.id == "retry" && c.attempt == 1:
				failedAt = c.at
			case c.id == "retry":
				if c.at.Sub(failedAt) < delay {
					t.Errorf("retry after %v, before the policy's %v", c.at.Sub(failedAt), delay)
				}
				got[c.id] = true
			case c.id == "due":
				if c.at.Before(due) {
					t.Errorf("handled %v before its DueAt", due.Sub(c.at))
				}
				got[c.id] = true
			}
		case <-deadline:
			t.Fatalf("handled %v within %v; want the retry and the due message (PollInterval is an hour)", got, waitTimeout)
		}
	}
	waitFor(t, "both messages Done", func() bool {
		return e.status("s", "retry") == inbox.StatusDone && e.status("s", "due") == inbox.StatusDone
	})
}
