package prometheus_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

// The cost the collector adds to one publish and one delivery.
func BenchmarkPublish(b *testing.B) {
	c := newCollector(b, outboxprom.Config{})
	env := event(b, "OrderPlaced")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, done := c.Publish(ctx, env)
		done(nil)
	}
}

func BenchmarkDeliver(b *testing.B) {
	c := newCollector(b, outboxprom.Config{})
	d := core.Delivery{Event: event(b, "OrderPlaced"), Path: core.PathHot, Attempt: 1, Committed: time.Now()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, end := c.Deliver(ctx, d)
		end(core.DeliveryResult{Outcome: core.OutcomeDone, Listeners: time.Millisecond})
	}
}

func BenchmarkProcessInbox(b *testing.B) {
	c := newCollector(b, outboxprom.Config{})
	m := core.InboxMessage{Source: "shop", MessageID: "m1", Topic: "order.created", Store: "eu",
		Mode: core.InboxQueued, Attempt: 1, Enqueued: time.Now()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, end := c.ProcessInbox(ctx, m)
		end(core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
	}
}

func BenchmarkMetricsSignal(b *testing.B) {
	c := newCollector(b, outboxprom.Config{})
	m := c.ForStore("acme")
	b.ReportAllocs()
	for b.Loop() {
		m.HotEnqueued()
	}
}
