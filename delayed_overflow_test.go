package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/retry"
)

// A delayed event, or a retry, that no timer can hold (RetryCapacity is
// taken) is delivered by this node's poller soon after it is due, as the
// README says (within a Poller.Interval), on every database. Its row was
// leased to this node until Lease after it was due, and the poller leaves
// the rows of its own live leases out while the dispatcher holds events
// (here the event on the timer): it waited the whole Lease (2 min by
// default), and an ordered key behind it as long.
func TestDelayedAndRetriedPastTheTimersAreNotHeldUntilTheirLease(t *testing.T) {
	for dbName, open := range testDatabases {
		t.Run(dbName, func(t *testing.T) {
			ctx := context.Background()
			cfg := outbox.Config{Logger: quietLogger()}
			cfg.Dispatcher.RetryCapacity = 1
			cfg.Dispatcher.Retry = retry.PolicyFunc(func(int) time.Duration { return 200 * time.Millisecond })
			cfg.Poller.Interval = 100 * time.Millisecond
			ob, err := outbox.New(ctx, open(t, "delayed_overflow.db"), cfg)
			if err != nil {
				t.Fatal(err)
			}
			seen := make(chan string, 16)
			var failed atomic.Bool
			ob.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error {
				if v, _ := e.Header("fail-once"); v == "yes" && failed.CompareAndSwap(false, true) {
					return errors.New("first attempt fails")
				}
				seen <- e.ID()
				return nil
			})
			startUntilCleanup(t, ob)
			publish := func(b *core.Builder) string {
				env, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err }); err != nil {
					t.Fatal(err)
				}
				return env.ID()
			}
			// The one timer, taken for an hour.
			publish(core.NewEvent("E").PayloadJSONString(`{}`).Delay(time.Hour))
			// A delayed event the timers cannot hold.
			start := time.Now()
			id := publish(core.NewEvent("E").PayloadJSONString(`{}`).Delay(300 * time.Millisecond))
			if got := testsupport.Recv(t, 10*time.Second, seen, "the delayed event"); got != id {
				t.Fatalf("delivered %s, want %s", got, id)
			}
			t.Logf("delayed 300 ms, delivered after %v", time.Since(start))
			// A retry the timers cannot hold.
			start = time.Now()
			id = publish(core.NewEvent("E").PayloadJSONString(`{}`).Header("fail-once", "yes"))
			if got := testsupport.Recv(t, 10*time.Second, seen, "the retried event"); got != id {
				t.Fatalf("delivered %s, want %s", got, id)
			}
			t.Logf("retried after 200 ms, delivered after %v", time.Since(start))
		})
	}
}
