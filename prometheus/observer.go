package prometheus

import (
	"context"
	"time"

	"github.com/outbox-go/outbox/core"
)

// Publish implements core.Observer: it adds no headers and counts
// outbox_published_total{event_type} when the event was inserted,
// outbox_publish_errors_total{event_type} when Publish failed.
func (c *Collector) Publish(_ context.Context, env core.Envelope) (map[string]string, func(error)) {
	return nil, c.types.entry(env.Type()).done
}

// Deliver implements core.Observer: it returns ctx unchanged, observes
// outbox_commit_to_listener_seconds{store,path} for an event's first
// delivery (not core.Delivery.Redelivered: not a retry, nor an event back
// after it was put off) whose commit time is known, and when the attempt
// ends counts
// outbox_deliveries_total{store,event_type,path,outcome} and observes
// outbox_listener_duration_seconds{store,event_type} (unless no listener
// ran: outcome unhandled).
func (c *Collector) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	v := c.view(d.Store)
	if due := d.Due(); d.Attempt <= 1 && !d.Redelivered && !due.IsZero() && int(d.Path) < len(v.commitToListener) {
		// Clocks of nodes may disagree on a claimed row's insert time:
		// never observe a negative latency. A delayed event counts from
		// its NotBefore.
		v.commitToListener[d.Path].Observe(max(0, time.Since(due).Seconds()))
	}
	typ, path := c.types.entry(d.Event.Type()).label, d.Path
	return ctx, func(r core.DeliveryResult) {
		v := v.live()
		v.delivered(deliveryKey{typ: typ, path: path, outcome: r.Outcome}).Inc()
		if r.Outcome != core.OutcomeUnhandled {
			v.listenerSeconds(typ).Observe(max(0, r.Listeners.Seconds()))
		}
	}
}

// DoneWritten implements core.Observer: outbox_done_batch_size{store} and
// outbox_done_write_seconds{store} for every write,
// outbox_done_write_errors_total{store} for a failed one.
func (c *Collector) DoneWritten(store string, n int, took time.Duration, err error) {
	v := c.view(store)
	v.doneBatch.Observe(float64(n))
	v.doneWrite.Observe(max(0, took.Seconds()))
	if err != nil {
		v.doneErrors.Inc()
	}
}

// Claimed implements core.Observer: outbox_claim_seconds{store} for every
// claim, outbox_claimed_total{store} counts the rows claimed,
// outbox_claim_errors_total{store} the failed claims.
func (c *Collector) Claimed(store string, rows int, took time.Duration, err error) {
	v := c.view(store)
	v.claim.Observe(max(0, took.Seconds()))
	if err != nil {
		v.claimErrors.Inc()
		return
	}
	addInt(v.claimed, rows)
}
