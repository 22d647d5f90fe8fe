package prometheus_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

// A series born at 1 shows no increment to rate() and increase(): the
// first retry or DEAD attempt of a type delivered before, and the first
// failed Publish of a type published before, must land on series that
// existed at 0 (a scrape in between sees them).
func TestFailureSeriesExistBeforeTheFirstFailure(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	ctx := context.Background()

	_, end := c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Store: "eu", Path: core.PathHot, Attempt: 1})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	for _, o := range []string{"retry", "dead"} {
		want := labels{"store": "eu", "event_type": "Shipped", "path": "hot", "outcome": o}
		if _, m := series(t, g, "outbox_deliveries_total", want); m == nil {
			t.Errorf("after a done attempt, no series %v at 0", want)
		}
	}
	// Another path of the type gets its own at its first attempt.
	if _, m := series(t, g, "outbox_deliveries_total", labels{"store": "eu", "event_type": "Shipped", "path": "cold", "outcome": "retry"}); m != nil {
		t.Error("a path not delivered on has series")
	}
	_, end = c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Store: "eu", Path: core.PathHot, Attempt: 1})
	end(core.DeliveryResult{Outcome: core.OutcomeRetry, Err: errors.New("listener failed")})
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "eu", "event_type": "Shipped", "path": "hot", "outcome": "retry"}, 1)
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "eu", "event_type": "Shipped", "path": "hot", "outcome": "done"}, 1)

	// A type nobody listens to gets its unhandled series only.
	_, end = c.Deliver(ctx, core.Delivery{Event: event(t, "Orphan"), Store: "eu", Path: core.PathCold, Attempt: 1})
	end(core.DeliveryResult{Outcome: core.OutcomeUnhandled})
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "eu", "event_type": "Orphan", "path": "cold", "outcome": "unhandled"}, 1)
	for _, o := range []string{"done", "retry", "dead"} {
		if _, m := series(t, g, "outbox_deliveries_total", labels{"store": "eu", "event_type": "Orphan", "outcome": o}); m != nil {
			t.Errorf("an unhandled type has a %s series", o)
		}
	}

	_, done := c.Publish(ctx, event(t, "Shipped"))
	done(nil)
	if _, m := series(t, g, "outbox_publish_errors_total", labels{"event_type": "Shipped"}); m == nil {
		t.Error("after a Publish, no outbox_publish_errors_total series at 0 for its type")
	}
	_, done = c.Publish(ctx, event(t, "Shipped"))
	done(errors.New("insert failed"))
	wantValue(t, g, "outbox_publish_errors_total", labels{"event_type": "Shipped"}, 1)
	wantValue(t, g, "outbox_published_total", labels{"event_type": "Shipped"}, 1)
	// A type only delivered has no publish series.
	if f := family(t, g, "outbox_published_total"); f != nil {
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels{"event_type": "Orphan"}) {
				t.Error("a type never published has a publish series")
			}
		}
	}
}

// A Deliver begun before ForgetStore counts, when it ends, on the store's
// series created again, as the other signals of a forgotten view do.
func TestDeliveryEndingAfterForgetStore(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	ctx := context.Background()
	_, end := c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Store: "eu", Path: core.PathHot, Attempt: 1})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	_, end = c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Store: "eu", Path: core.PathHot, Attempt: 1})
	c.ForgetStore("eu")
	end(core.DeliveryResult{Outcome: core.OutcomeDead})
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "eu", "event_type": "Shipped", "path": "hot", "outcome": "dead"}, 1)
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "eu", "event_type": "Shipped", "path": "hot", "outcome": "done"}, 0)
	wantValue(t, g, "outbox_listener_duration_seconds", labels{"store": "eu", "event_type": "Shipped"}, 1)
}
