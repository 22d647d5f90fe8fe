package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outbox-go/outbox/core"
	outboxotel "github.com/outbox-go/outbox/otel"
)

// observeCloseTimeout bounds flushing and shutting down the scenario's
// OpenTelemetry providers.
const observeCloseTimeout = 10 * time.Second

// discardExporter is a span exporter that drops every span, counting
// them: the spans are created, sampled, ended and batched by the SDK as
// in production, and only the network export is left out.
type discardExporter struct {
	spans atomic.Int64
}

// ExportSpans counts the spans and drops them.
func (e *discardExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return nil
}

// Shutdown does nothing: there is no connection to close.
func (e *discardExporter) Shutdown(context.Context) error { return nil }

// observation is the OpenTelemetry SDK of observed_end_to_end: a
// TracerProvider sampling every span (or, with -observe-sample, a share of
// the traces) into a batch span processor over a discardExporter, and a
// MeterProvider with a ManualReader (instruments record into their
// aggregations; the scenario collects once, at its end).
//
// The batch span processor keeps the SDK's defaults, as a production
// setup over an OTLP exporter would: a queue of 2048 spans, batches of
// 512, exported every 5 s or when a batch is full, spans dropped rather
// than blocking the caller when the queue is full.
type observation struct {
	tp       *sdktrace.TracerProvider
	mp       *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
	exporter *discardExporter
	observer *outboxotel.Observer
}

// newObservation builds the SDK providers and the outbox's Observer;
// sample is the share of traces sampled (1: every span).
func newObservation(sample float64) (*observation, error) {
	o := &observation{exporter: &discardExporter{}, reader: sdkmetric.NewManualReader()}
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler(sample)),
		sdktrace.WithBatcher(o.exporter))
	o.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	var err error
	if o.observer, err = outboxotel.New(outboxotel.Config{TracerProvider: o.tp, MeterProvider: o.mp}); err != nil {
		return nil, errors.Join(err, o.shutdown())
	}
	return o, nil
}

// sampler returns the sampler of a share sample of the traces: every span
// for 1, else the publish decides by trace ID and its deliveries follow.
func sampler(sample float64) sdktrace.Sampler {
	if sample >= 1 {
		return sdktrace.AlwaysSample()
	}
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(sample))
}

// samplingName names the sampler of sample in the notes and the summary.
func samplingName(sample float64) string {
	if sample >= 1 {
		return "always_sample"
	}
	return "parentbased_ratio_" + strconv.FormatFloat(sample, 'g', -1, 64)
}

// finish flushes the ended spans to the exporter and collects the
// metrics once. It returns the spans exported and the data points
// collected, and fails when the SDK saw no span or no measurement (the
// scenario would not have measured what it claims to).
func (o *observation) finish(ctx context.Context) (spans int64, points int, err error) {
	ctx, cancel := context.WithTimeout(ctx, observeCloseTimeout)
	defer cancel()
	if err := o.tp.ForceFlush(ctx); err != nil {
		return 0, 0, fmt.Errorf("flushing the spans: %w", err)
	}
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(ctx, &rm); err != nil {
		return 0, 0, fmt.Errorf("collecting the metrics: %w", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			points += dataPoints(m.Data)
		}
	}
	spans = o.exporter.spans.Load()
	switch {
	case spans == 0:
		return spans, points, errors.New("the tracer provider exported no span")
	case points == 0:
		return spans, points, errors.New("the meter provider collected no measurement")
	}
	return spans, points, nil
}

// dataPoints counts the data points of one metric.
func dataPoints(d metricdata.Aggregation) int {
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		return len(d.DataPoints)
	case metricdata.Sum[float64]:
		return len(d.DataPoints)
	case metricdata.Gauge[int64]:
		return len(d.DataPoints)
	case metricdata.Gauge[float64]:
		return len(d.DataPoints)
	case metricdata.Histogram[int64]:
		return len(d.DataPoints)
	case metricdata.Histogram[float64]:
		return len(d.DataPoints)
	}
	return 0
}

// shutdown stops both providers (the batch processor's goroutine).
func (o *observation) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), observeCloseTimeout)
	defer cancel()
	return errors.Join(o.tp.Shutdown(ctx), o.mp.Shutdown(ctx))
}

// observedMetrics is the Metrics of observed_end_to_end: the
// OpenTelemetry Observer's, with the signals the bench reports (hot
// drops, cold enqueues) counted as well, as in the other scenarios. The
// Observer's other methods, optional interfaces included, are promoted.
type observedMetrics struct {
	*outboxotel.Observer
	c *counters
}

// HotEnqueued records the signal in both.
func (m observedMetrics) HotEnqueued() { m.Observer.HotEnqueued(); m.c.HotEnqueued() }

// HotDropped records the signal in both.
func (m observedMetrics) HotDropped() { m.Observer.HotDropped(); m.c.HotDropped() }

// ColdEnqueued records the signal in both.
func (m observedMetrics) ColdEnqueued() { m.Observer.ColdEnqueued(); m.c.ColdEnqueued() }

// LeaseLost records the signal in both.
func (m observedMetrics) LeaseLost(n int) { m.Observer.LeaseLost(n); m.c.LeaseLost(n) }

var _ core.Metrics = observedMetrics{}

// runObservedEndToEnd is end_to_end with the outbox observed through
// OpenTelemetry: an *otel.Observer as Config.Observer and Config.Metrics
// over the SDK (every span sampled, batched and discarded; instruments
// recording into a ManualReader). Its rate against end_to_end's is the
// cost of observability.
func (b *bench) runObservedEndToEnd(ctx context.Context) (result, error) {
	obs, err := newObservation(b.opts.observeSample)
	if err != nil {
		return result{}, err
	}
	defer func() {
		if err := obs.shutdown(); err != nil {
			b.warn("shutting down the OpenTelemetry SDK: %v", err)
		}
	}()
	r, _, err := b.endToEndVia(ctx, scenarioObservedE2E, b.opts.n, func(int) string { return "" }, outboxSetup{
		observer: obs.observer,
		metrics:  func(c *counters) core.Metrics { return observedMetrics{Observer: obs.observer, c: c} },
	})
	if err != nil {
		return r, err
	}
	spans, points, err := obs.finish(ctx)
	if err != nil {
		return r, err
	}
	r.Notes = []string{"tracer=sdk/" + samplingName(b.opts.observeSample) + "/batch/discard", "meter=sdk/manual_reader",
		fmt.Sprintf("spans_exported=%d", spans), fmt.Sprintf("metric_points=%d", points)}
	return r, nil
}
