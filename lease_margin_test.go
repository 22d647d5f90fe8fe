package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox"
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
	const grace = time.Nanosecond
	ob, seen := newDelivering(t, sqliteDB(t, "lease.db"), outbox.Config{
		Dispatcher: dispatcher.Config{ListenerTimeout: time.Second, ListenerGrace: grace, StatusTimeout: time.Second,
			Lease: 2*time.Second + grace + time.Nanosecond}})
	const n = 50
	for range n {
		if err := ob.InTx(ctx, func(ctx context.Context) error {
			_, err := ob.Publish(ctx, event(t))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for len(got) < n {
		got[testsupport.Recv(t, 30*time.Second, seen, "every event delivered")] = true
	}
}
