package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// lagMetrics records the largest oldest-pending age reported.
type lagMetrics struct {
	core.NopMetrics
	mu  sync.Mutex
	max time.Duration
}

func (m *lagMetrics) OldestLag(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.max = max(m.max, d)
}

func (m *lagMetrics) largest() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// Events waiting in this node's own queues for a worker (a listener
// stuck, queues far from full) show in the oldest-pending gauge: the
// poller's claims leave this node's rows out, so it reported 0 however
// long they waited, and the lag alerts stayed silent (an audit: 2,000
// events behind a slow listener, the gauge at 0 for minutes).
func TestOldestLagSeesEventsHeldInOwnQueues(t *testing.T) {
	m := &lagMetrics{}
	stuck := make(chan struct{})
	ob := openStarted(t, outbox.Config{Metrics: m,
		Dispatcher: dispatcher.Config{Workers: 1},
		Poller:     poller.Config{Interval: 10 * time.Millisecond}},
		func(ob *outbox.Outbox) {
			ob.RegisterFunc("Slow", func(ctx context.Context, _ core.Envelope) error {
				select {
				case <-stuck:
				case <-ctx.Done():
				}
				return nil
			})
		})
	t.Cleanup(func() { close(stuck) }) // before the outbox closes (cleanups run last first)
	for range 5 {
		publish(t, ob, "Slow")
	}
	testsupport.WaitFor(t, 30*time.Second, "an oldest-pending age of 300 ms or more", func() bool {
		return m.largest() >= 300*time.Millisecond
	})
}
