package prometheus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

// An event put off (its downstream unavailable) and one left for a
// listener registered later (UnhandledLeave) come back from their rows
// with their attempt count unchanged: outbox_commit_to_listener_seconds
// observes each event's first delivery only, not the outage or the wait
// for a listener on top of it.
func TestCommitToListenerCountsFirstDeliveriesOnly(t *testing.T) {
	ctx := context.Background()
	col := newCollector(t, outboxprom.Config{})
	db := sqliteDB(t, "ob.db")
	ob, err := outbox.New(ctx, db, outbox.Config{
		Metrics:    col,
		Observer:   col,
		Dispatcher: dispatcher.Config{Unhandled: dispatcher.UnhandledLeave, UnhandledDelay: 10 * time.Millisecond},
		// The default SkipRecent leaves the new rows to the hot path: with
		// none, a poll between a commit and its hand-off took the row
		// first, a first delivery on the cold path (seen once in CI).
		// Rows put off or left for a listener come due through wake-ups,
		// which skip nothing.
		Poller: poller.Config{Interval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	var downCalls atomic.Int32
	ob.RegisterFunc("Down", func(context.Context, core.Envelope) error {
		if downCalls.Add(1) == 1 {
			return core.Unavailable(errors.New("broker unreachable"), 10*time.Millisecond)
		}
		return nil
	})
	start(t, ctx, ob)
	for _, typ := range []string{"Down", "Later"} {
		env, err := outbox.JSONEvent(typ, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err }); err != nil {
			t.Fatal(err)
		}
	}
	g := col.Gatherer()
	unhandled := labels{"store": "", "event_type": "Later", "outcome": "unhandled"}
	testsupport.WaitFor(t, 30*time.Second, "Later looked at twice without a listener", func() bool {
		return total(t, g, "outbox_deliveries_total", unhandled) >= 2
	})
	ob.RegisterFunc("Later", func(context.Context, core.Envelope) error { return nil })
	testsupport.WaitFor(t, 30*time.Second, "both events DONE", func() bool {
		c, err := ob.CountByStatus(ctx)
		return err == nil && c[core.StatusDone] == 2
	})

	wantValue(t, g, "outbox_deliveries_total", labels{"store": "", "event_type": "Down", "outcome": "put_off"}, 1)
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "", "event_type": "Down", "path": "cold", "outcome": "done"}, 1)
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "", "event_type": "Later", "path": "cold", "outcome": "done"}, 1)
	if observed := total(t, g, "outbox_commit_to_listener_seconds", labels{"store": ""}); observed != 2 {
		t.Errorf("outbox_commit_to_listener_seconds: %v observations, want 2 (each event's first delivery; %v unhandled looks at Later)",
			observed, total(t, g, "outbox_deliveries_total", unhandled))
	}
	wantValue(t, g, "outbox_commit_to_listener_seconds", labels{"store": "", "path": "hot"}, 2)
}

// total sums the values (a histogram's sample counts) of the series of
// name whose labels include want.
func total(t testing.TB, g prom.Gatherer, name string, want labels) float64 {
	t.Helper()
	var sum float64
	for _, m := range family(t, g, name).GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		default:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}
