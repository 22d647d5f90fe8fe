package otel_test

import (
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outbox-go/outbox/core"
	obsotel "github.com/outbox-go/outbox/otel"
)

// A propagator that writes no trace context is refused: one of no
// propagators, and one that declares a field but writes no span's context
// (baggage alone: New took it, and every delivery started a trace of its
// own).
func TestNewRefusesAPropagatorThatPropagatesNothing(t *testing.T) {
	for name, p := range map[string]propagation.TextMapPropagator{
		"empty composite": propagation.NewCompositeTextMapPropagator(),
		"baggage alone":   propagation.Baggage{},
	} {
		_, err := obsotel.New(obsotel.Config{Propagator: p})
		if !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("%s: err = %v, want core.ErrInvalidConfig", name, err)
		}
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Propagator" {
			t.Errorf("%s: err = %v, want a ConfigError naming Propagator", name, err)
		}
	}
	for name, p := range map[string]propagation.TextMapPropagator{
		"trace context":           propagation.TraceContext{},
		"trace context + baggage": propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	} {
		if _, err := obsotel.New(obsotel.Config{Propagator: p}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNewDefaultsToW3CWhenNoGlobalPropagatorIsSet(t *testing.T) {
	obs, err := obsotel.New(obsotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// A span from the global (no-op) provider has no valid context, so
	// probe the propagator through the headers of a known event instead.
	env := event(t, "T", map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	ctx, end := obs.Deliver(t.Context(), core.Delivery{Event: env, Attempt: 1})
	defer end(core.DeliveryResult{})
	got := propagation.MapCarrier{}
	obs.InjectHeaders(ctx, got.Set)
	if !strings.Contains(got["traceparent"], "0af7651916cd43dd8448eb211c80319c") {
		t.Errorf("default propagator injected %v, want the W3C trace context of the event", got)
	}
}

// nilPropagator is a propagator whose nil pointer panics when called.
type nilPropagator struct{ propagation.TraceContext }

func TestNewRefusesTypedNilProvidersAndPropagator(t *testing.T) {
	for field, cfg := range map[string]obsotel.Config{
		"TracerProvider": {TracerProvider: (*sdktrace.TracerProvider)(nil)},
		"MeterProvider":  {MeterProvider: (*sdkmetric.MeterProvider)(nil)},
		"Propagator":     {Propagator: (*nilPropagator)(nil)},
	} {
		t.Run(field, func(t *testing.T) {
			obs, err := obsotel.New(cfg) // panicked with a nil pointer dereference
			if !errors.Is(err, core.ErrInvalidConfig) || obs != nil {
				t.Fatalf("New = %v, %v; want core.ErrInvalidConfig", obs, err)
			}
			var ce *core.ConfigError
			if !errors.As(err, &ce) || ce.Field != field || !strings.Contains(ce.Msg, "must not be nil") {
				t.Errorf("err = %v, want a ConfigError naming %s", err, field)
			}
		})
	}
}
