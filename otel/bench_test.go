package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

// The cost the Observer adds to one publish and one delivery attempt,
// with the SDK recording every span and measurement in memory.
func BenchmarkObserver(b *testing.B) {
	for _, bc := range []struct {
		name string
		run  func(*harness, core.Envelope)
	}{
		{"Publish", func(h *harness, env core.Envelope) {
			_, done := h.obs.Publish(context.Background(), env)
			done(nil)
		}},
		{"Deliver", func(h *harness, env core.Envelope) {
			_, end := h.obs.Deliver(context.Background(), core.Delivery{Event: env, Path: core.PathHot, Attempt: 1, Committed: time.Now()})
			end(core.DeliveryResult{Outcome: core.OutcomeDone, Listeners: time.Millisecond})
		}},
		{"Metrics", func(h *harness, _ core.Envelope) {
			h.obs.HotEnqueued()
			h.obs.QueueDepths(1, 2)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := newBenchHarness(b)
			env, err := core.NewEvent("OrderPlaced").PayloadBytes([]byte("{}")).Header("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").Build()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				bc.run(h, env)
			}
		})
	}
}
