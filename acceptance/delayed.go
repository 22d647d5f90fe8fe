package acceptance

import (
	"context"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
)

// delayedPollInterval is the poll interval of the delayed-delivery cases.
const delayedPollInterval = time.Second

// dbNow reads the database clock.
func dbNow(ctx context.Context, t *testing.T, f *fixture, h Harness) time.Time {
	var s string
	if err := f.db.GetContext(ctx, &s, h.NowSQL); err != nil {
		t.Errorf("database clock: %v", err)
		return time.Time{}
	}
	now, err := time.Parse("2006-01-02 15:04:05.999999", s)
	if err != nil {
		t.Errorf("database clock %q: %v", s, err)
	}
	return now
}

// A delayed event is never handed to a listener before its time, checked
// against the database clock, and arrives within one poll interval after
// it: from an in-process timer, or (timers disabled) from the poller.
func testDelayed(t *testing.T, h Harness, pollerOnly bool) {
	if h.NowSQL == "" {
		t.Skip("harness has no database clock query")
	}
	f := newFixture(t, h, true, func(c *outbox.Config) {
		c.Poller.Interval = delayedPollInterval
		c.Poller.SkipRecent = -1
		if pollerOnly {
			c.Dispatcher.RetryCapacity = -1 // no timers: the poller delivers it
		}
	})
	invoked := make(chan time.Time, 1)
	f.ob.RegisterFunc("Reminder", func(ctx context.Context, e core.Envelope) error {
		invoked <- dbNow(ctx, t, f, h)
		return nil
	})
	const delay = 1500 * time.Millisecond
	env := mustEvent(t, core.NewEvent("Reminder").Delay(delay).PayloadJSONString(`{}`))
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	stored := f.status(t, env.ID())
	if !stored.AvailableAt.Equal(env.NotBefore()) {
		t.Fatalf("available_at %v, want NotBefore %v", stored.AvailableAt, env.NotBefore())
	}
	var at time.Time
	select {
	case at = <-invoked:
	case <-time.After(waitTimeout):
		t.Fatal("delayed event never delivered")
	}
	// SQLite's clock has millisecond precision: compare at that precision.
	due := env.NotBefore().Truncate(time.Millisecond)
	if at.Before(due) {
		t.Fatalf("delivered at %v (database clock), %v before its time %v", at, due.Sub(at), due)
	}
	late := at.Sub(due)
	t.Logf("delivered %v after its time (poller only: %v)", late, pollerOnly)
	if late > delayedPollInterval {
		t.Errorf("delivered %v after its time, more than one poll interval (%v)", late, delayedPollInterval)
	}
	f.waitStatus(t, env.ID(), core.StatusDone)
}
