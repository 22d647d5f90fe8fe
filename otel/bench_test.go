package otel_test

import (
	"context"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/outbox-go/outbox/core"
	obsotel "github.com/outbox-go/outbox/otel"
)

// The cost the Observer adds to one publish, one delivery attempt and
// one processing of an inbox message, with the SDK recording every span
// and measurement in memory.
//
// Publish gets an event without a trace context (the common case: Publish
// writes it); Deliver one with the trace context Publish wrote;
// ProcessInbox a queued message, its context without a span.
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
		{"ProcessInbox", func(h *harness, _ core.Envelope) {
			_, end := h.obs.ProcessInbox(context.Background(), core.InboxMessage{Source: "orders", MessageID: "m-1", Topic: "OrderPlaced",
				Mode: core.InboxQueued, Attempt: 1, Enqueued: time.Now()})
			end(core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
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

// BenchmarkObserverNoSDK is BenchmarkObserver over the no-op providers:
// what the Observer itself costs, the SDK's span and measurement work
// left out (a no-op span has no context of its own, so Publish writes no
// header).
func BenchmarkObserverNoSDK(b *testing.B) {
	obs, err := obsotel.New(obsotel.Config{TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider: metricnoop.NewMeterProvider(), Propagator: w3c})
	if err != nil {
		b.Fatal(err)
	}
	plain, err := core.NewEvent("OrderPlaced").PayloadBytes([]byte("{}")).Build()
	if err != nil {
		b.Fatal(err)
	}
	traced, err := plain.WithHeaders(map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Publish", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, done := obs.Publish(context.Background(), plain)
			done(nil)
		}
	})
	b.Run("Deliver", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, end := obs.Deliver(context.Background(), core.Delivery{Event: traced, Path: core.PathHot, Attempt: 1, Committed: time.Now()})
			end(core.DeliveryResult{Outcome: core.OutcomeDone, Listeners: time.Millisecond})
		}
	})
	b.Run("ProcessInbox", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, end := obs.ProcessInbox(context.Background(), core.InboxMessage{Source: "orders", MessageID: "m-1", Topic: "OrderPlaced",
				Mode: core.InboxQueued, Attempt: 1, Enqueued: time.Now()})
			end(core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
		}
	})
}
