package otel

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-go/outbox/core"
)

// ScopeName is the instrumentation scope of the tracer and meter: the
// import path of this package.
const ScopeName = "github.com/outbox-go/outbox/otel"

// Config configures an [Observer]. The zero value uses the global
// OpenTelemetry providers. A nil pointer in a field (a nil
// *sdktrace.TracerProvider, say) is an error, not the default: its
// methods would panic.
type Config struct {
	// TracerProvider creates the spans. Defaults to the global one,
	// otel.GetTracerProvider(): until a global provider is set it hands
	// out a delegate, so one set after New is used from then on.
	TracerProvider trace.TracerProvider
	// MeterProvider creates the instruments. Defaults to the global one,
	// otel.GetMeterProvider() (a delegate as well, until one is set).
	MeterProvider metric.MeterProvider
	// Propagator writes a span's context into event and broker message
	// headers and reads it back at delivery. The W3C trace context plus
	// baggage is recommended:
	//
	//	propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	//
	// Defaults to the global propagator, otel.GetTextMapPropagator(), when
	// one is set before New runs, else to the W3C one above (the global
	// default propagates nothing, which would leave every delivery out of
	// its publisher's trace). A Propagator that writes nothing for a
	// span's context (none at all, or baggage alone) is an error.
	Propagator propagation.TextMapPropagator
	// LinkOnly makes each delivery attempt start a trace of its own,
	// linked to the publisher's span, instead of a span in the
	// publisher's trace. Defaults to false: one trace from the publisher
	// to the listeners.
	LinkOnly bool
}

// withDefaults returns cfg with every unset field at its default.
func (cfg Config) withDefaults() Config {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	if cfg.Propagator == nil {
		cfg.Propagator = otel.GetTextMapPropagator()
		if typedNil(cfg.Propagator) {
			return cfg // validate reports it
		}
		if len(cfg.Propagator.Fields()) == 0 {
			cfg.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
		}
	}
	return cfg
}

// validate reports every invalid field of cfg (defaults applied) at once.
func (cfg Config) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    any
	}{{"TracerProvider", cfg.TracerProvider}, {"MeterProvider", cfg.MeterProvider}, {"Propagator", cfg.Propagator}} {
		if typedNil(f.v) {
			errs = append(errs, &core.ConfigError{Field: f.name, Msg: fmt.Sprintf("must not be nil (a nil %T): leave the field unset for the default", f.v)})
		}
	}
	if !typedNil(cfg.Propagator) && !writesSpanContext(cfg.Propagator) {
		errs = append(errs, &core.ConfigError{Field: "Propagator", Msg: "writes no span context into the headers: deliveries could not join their publisher's trace (use propagation.TraceContext{})"})
	}
	return errors.Join(errs...)
}

// probeSpan is the span context writesSpanContext propagates: valid,
// sampled, remote, as a publisher's is at its delivery.
var probeSpan = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
	SpanID:     trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
	TraceFlags: trace.FlagsSampled,
	Remote:     true,
})

// writesSpanContext reports whether p writes anything for a context
// carrying a sampled span: a propagator of baggage alone declares a field
// but writes nothing for it.
func writesSpanContext(p propagation.TextMapPropagator) bool {
	if len(p.Fields()) == 0 {
		return false
	}
	carrier := propagation.MapCarrier{}
	p.Inject(trace.ContextWithSpanContext(context.Background(), probeSpan), carrier)
	return len(carrier) > 0
}

// typedNil reports whether v holds a nil pointer, map, func, chan or
// interface: a provider or propagator whose methods would panic. A nil
// slice is not one: a composite propagator of no propagators is a nil
// slice, which propagates nothing but does not panic.
func typedNil(v any) bool {
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
