package otel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	obsotel "github.com/outbox-go/outbox/otel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is an Observer over in-memory exporters.
type harness struct {
	obs    *obsotel.Observer
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

func newHarness(t testing.TB, cfg obsotel.Config) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	return h.start(t, cfg)
}

// newBenchHarness is newHarness with spans sampled by sampler and ended
// into a batch span processor (its defaults) over an exporter that drops
// them, as in production minus the network, so that memory does not
// grow with b.N.
func newBenchHarness(b *testing.B, sampler sdktrace.Sampler) *harness {
	h := &harness{reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(discardExporter{}))
	return h.start(b, obsotel.Config{})
}

// discardExporter drops every span.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

func (h *harness) start(t testing.TB, cfg obsotel.Config) *harness {
	t.Helper()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	cfg.TracerProvider, cfg.MeterProvider = h.tp, mp
	if cfg.Propagator == nil {
		cfg.Propagator = w3c
	}
	obs, err := obsotel.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.obs = obs
	return h
}

// span returns the one ended span named name.
func (h *harness) span(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d ended spans named %q, want 1 (ended: %v)", len(found), name, spanNames(h.spans.Ended()))
	}
	return found[0]
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return names
}

// attr returns the value of key among kvs ("" and false when missing).
func attr(kvs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs fails t unless kvs hold every entry of want (compared as
// strings).
func wantAttrs(t *testing.T, what string, kvs []attribute.KeyValue, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := attr(kvs, attribute.Key(k))
		if !ok {
			t.Errorf("%s: attribute %s missing (have %v)", what, k, kvs)
			continue
		}
		if got.String() != v {
			t.Errorf("%s: attribute %s = %q, want %q", what, k, got.String(), v)
		}
	}
}

// collect reads every metric.
func (h *harness) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// point is one data point of any kind: its attributes and its value (the
// count for a histogram).
type point struct {
	attrs attribute.Set
	value float64
	sum   float64
}

func points(t *testing.T, m metricdata.Metrics) []point {
	t.Helper()
	var out []point
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{p.Attributes, float64(p.Value), float64(p.Value)})
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{p.Attributes, float64(p.Value), float64(p.Value)})
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, point{p.Attributes, p.Value, p.Value})
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{p.Attributes, float64(p.Count), float64(p.Sum)})
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, point{p.Attributes, float64(p.Count), p.Sum})
		}
	default:
		t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
	}
	return out
}

// metricPoint returns the value of the data point of metric name whose
// attributes hold want; it fails t when there is none.
func metricPoint(t *testing.T, ms map[string]metricdata.Metrics, name string, want map[string]string) point {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	pts := points(t, m)
	for _, p := range pts {
		match := true
		for k, v := range want {
			got, ok := p.attrs.Value(attribute.Key(k))
			if !ok || got.String() != v {
				match = false
				break
			}
		}
		if match {
			return p
		}
	}
	var have []string
	for _, p := range pts {
		have = append(have, p.attrs.Encoded(attribute.DefaultEncoder()))
	}
	t.Fatalf("metric %s: no data point with %v (have %v)", name, want, have)
	return point{}
}
