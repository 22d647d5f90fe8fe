package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// The smallest Lease the configuration takes (a nanosecond above
// ListenerTimeout + ListenerGrace + StatusTimeout) delivers every event:
// an event that waited for a worker has its lease renewed before its
// listener runs. Before, none was ever delivered: each event's remaining
// lease was too short to run on, it was left for a new claim, and claimed
// again with the same lease.
func TestSmallestLeaseDelivers(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "lease.db")
	const grace = time.Nanosecond
	ob, err := outbox.New(ctx, db, outbox.Config{Logger: (&testsupport.LogBuffer{}).Logger(),
		Dispatcher: dispatcher.Config{ListenerTimeout: time.Second, ListenerGrace: grace, StatusTimeout: time.Second,
			Lease: 2*time.Second + grace + time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got = map[string]bool{}
	)
	ob.RegisterAllFunc(func(_ context.Context, env core.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		got[env.ID()] = true
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(ctx) })
	const n = 50
	for range n {
		if err := ob.InTx(ctx, func(ctx context.Context) error {
			_, err := ob.Publish(ctx, event(t))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.WaitFor(t, 30*time.Second, "every event delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
}
