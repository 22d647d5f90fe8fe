package otel_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	obsotel "github.com/outbox-go/outbox/otel"
)

// The same Observer traces and measures the outbox: its listeners run
// under a consumer span in the trace of the request that published.
func Example() {
	// Your SDK set-up; an in-memory recorder stands in for an exporter.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()

	obs, err := obsotel.New(obsotel.Config{
		TracerProvider: tp,
		MeterProvider:  mp,
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	})
	if err != nil {
		log.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "outbox-otel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "ob.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ob, err := outbox.New(context.Background(), db, outbox.Config{
		Observer: obs, // spans, and the trace context in every event's headers
		Metrics:  obs, // queue depths, lag, leases... as OpenTelemetry instruments
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	delivered := make(chan trace.SpanContext, 1)
	ob.RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		delivered <- trace.SpanContextFromContext(ctx) // the consumer span
		return nil
	})
	if err := ob.Start(context.Background()); err != nil {
		log.Fatal(err)
	}

	// A request handler publishes under its own span.
	ctx, request := tp.Tracer("app").Start(context.Background(), "POST /orders")
	err = ob.InTx(ctx, func(ctx context.Context) error {
		env, err := outbox.JSONEvent("OrderPlaced", `{"id":42}`)
		if err != nil {
			return err
		}
		_, err = ob.Publish(ctx, env)
		return err
	})
	request.End()
	if err != nil {
		log.Fatal(err)
	}
	inListener := <-delivered
	if err := ob.Close(context.Background()); err != nil {
		log.Fatal(err)
	}

	// Spans end in no fixed order (the delivery may finish before the
	// request does): print them in the order of the flow.
	ended := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		ended[s.Name()] = s
	}
	for _, name := range []string{"POST /orders", "send OrderPlaced", "process OrderPlaced"} {
		s := ended[name]
		fmt.Printf("%s (%s) in the request's trace: %v\n", name, s.SpanKind(), s.SpanContext().TraceID() == request.SpanContext().TraceID())
	}
	fmt.Println("listener ran in the request's trace:", inListener.TraceID() == request.SpanContext().TraceID())
	// Output:
	// POST /orders (internal) in the request's trace: true
	// send OrderPlaced (producer) in the request's trace: true
	// process OrderPlaced (consumer) in the request's trace: true
	// listener ran in the request's trace: true
}
