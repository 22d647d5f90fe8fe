package otel_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outbox-go/outbox/core"
)

// The cost the Observer adds to one publish and one delivery attempt,
// with the SDK recording every span and measurement in memory.
//
// Publish gets an event without a trace context (the common case: Publish
// writes it); Deliver one with the trace context Publish wrote.
func BenchmarkObserver(b *testing.B) {
	plain, err := core.NewEvent("OrderPlaced").PayloadBytes([]byte("{}")).Build()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		run  func(*harness, core.Envelope)
	}{
		{"Publish", func(h *harness, _ core.Envelope) {
			_, done := h.obs.Publish(context.Background(), plain)
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
		for _, sc := range []struct {
			name    string
			sampler sdktrace.Sampler
		}{
			{"AlwaysSample", sdktrace.AlwaysSample()},
			{"ParentBasedRatio0.1", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))},
		} {
			b.Run(bc.name+"/"+sc.name, func(b *testing.B) {
				h := newBenchHarness(b, sc.sampler)
				// A trace ID that the ratio sampler does not sample.
				env, err := core.NewEvent("OrderPlaced").PayloadBytes([]byte("{}")).Header("traceparent", "00-ff00000000000000ffffffffffffffff-b7ad6b7169203331-00").Build()
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
}
