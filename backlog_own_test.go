package outbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// Events this node's hot queue dropped (a burst larger than it) stay
// leased to this node and drain at worker speed through the cold queue,
// without waiting for Poller.Interval between claims. The poller took one
// claim's worth per Interval: once a claim had taken this node's rows,
// the next ones left them out as if all were held, until the dispatcher
// held nothing. With the default capacities (the hot queue holding 1,000
// events, a claim 200 rows) a burst of 6,000 was not drained in a minute.
// SkipRecent is -1: the burst is younger than the default 1 s at the poll
// at Start.
func TestOwnDroppedBacklogDrainsWithoutWaitingForTheInterval(t *testing.T) {
	for name, c := range map[string]struct {
		dispatcher dispatcher.Config
		n          int
		work       time.Duration
	}{
		"small queues":                           {dispatcher.Config{HotCapacity: 10, ColdCapacity: 10}, 300, 0},
		"default queues, more held than a claim": {dispatcher.Config{}, 6000, 50 * time.Microsecond},
	} {
		t.Run(name, func(t *testing.T) {
			db := sqliteDB(t, "own-backlog.db")
			var delivered atomic.Int64
			ob, err := outbox.New(t.Context(), db, outbox.Config{
				Logger:     quietLogger(),
				Dispatcher: c.dispatcher,
				Poller:     poller.Config{Interval: time.Hour, SkipRecent: -1}, // a stalled drain would wait an hour
			})
			if err != nil {
				t.Fatal(err)
			}
			ob.RegisterFunc("E", func(context.Context, core.Envelope) error {
				if c.work > 0 {
					time.Sleep(c.work)
				}
				delivered.Add(1)
				return nil
			})
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = ob.Close(ctx)
			})
			if err := relaytest.PublishInOneTx(t.Context(), ob, "E", `{}`, c.n); err != nil {
				t.Fatal(err)
			}
			// Started after the burst, so the poll at Start finds it: its
			// first claims fill the cold queue, and the rest must follow.
			if err := ob.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			testsupport.WaitFor(t, 60*time.Second, "every event of the burst delivered", func() bool {
				return delivered.Load() >= int64(c.n)
			}, nil)
			waitStatusCount(t, ob, core.StatusDone, c.n)
		})
	}
}
