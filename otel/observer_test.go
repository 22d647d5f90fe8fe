package otel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/outbox-go/outbox/core"
	obsotel "github.com/outbox-go/outbox/otel"
)

func event(t *testing.T, typ string, headers map[string]string) core.Envelope {
	t.Helper()
	b := core.NewEvent(typ).ID("ev-" + typ).PayloadBytes([]byte("{}"))
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if env, err = env.WithHeaders(headers); err != nil {
		t.Fatal(err)
	}
	return env
}

// publish runs the Observer's Publish under a root span and returns the
// event with the headers Publish added, and the root span's context.
func publish(t *testing.T, h *harness, typ string, err error) (core.Envelope, trace.SpanContext) {
	t.Helper()
	ctx, root := h.tp.Tracer("test").Start(context.Background(), "request")
	defer root.End()
	env := event(t, typ, nil)
	headers, done := h.obs.Publish(ctx, env)
	env, herr := env.WithHeaders(headers)
	if herr != nil {
		t.Fatal(herr)
	}
	done(err)
	return env, root.SpanContext()
}

func TestPublishStartsAProducerSpanChildOfTheCaller(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env, root := publish(t, h, "OrderPlaced", nil)

	send := h.span(t, "send OrderPlaced")
	if send.SpanKind() != trace.SpanKindProducer {
		t.Errorf("kind = %v, want producer", send.SpanKind())
	}
	if send.Parent().SpanID() != root.SpanID() || send.SpanContext().TraceID() != root.TraceID() {
		t.Errorf("producer span's parent = %v, want the caller's span %v", send.Parent().SpanID(), root.SpanID())
	}
	wantAttrs(t, "producer span", send.Attributes(), map[string]string{
		"messaging.system": "outbox", "messaging.operation.type": "send", "messaging.operation.name": "send",
		"messaging.destination.name": "OrderPlaced", "messaging.message.id": "ev-OrderPlaced",
	})
	// The traceparent carried by the event is the producer span's.
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(env.Headers())))
	if sc.SpanID() != send.SpanContext().SpanID() || sc.TraceID() != root.TraceID() {
		t.Errorf("event's traceparent %q is not the producer span %v", env.Headers()["traceparent"], send.SpanContext().SpanID())
	}
	if send.Status().Code == codes.Error {
		t.Errorf("status = %v for a successful publish", send.Status())
	}
	ms := h.collect(t)
	if p := metricPoint(t, ms, obsotel.MetricSent, map[string]string{"messaging.destination.name": "OrderPlaced", "messaging.operation.name": "send"}); p.value != 1 {
		t.Errorf("%s = %v, want 1", obsotel.MetricSent, p.value)
	}
}

func TestPublishFailureSetsErrorStatus(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	// Wrapped as the outbox wraps its errors: error.type names the cause.
	publish(t, h, "T", fmt.Errorf("outbox: publish x: %w", &core.ValidationError{Field: "type", Err: core.ErrInvalidText}))
	send := h.span(t, "send T")
	if send.Status().Code != codes.Error {
		t.Errorf("status = %v, want Error", send.Status())
	}
	if v, ok := attr(send.Attributes(), "error.type"); !ok || v.AsString() != "*core.ValidationError" {
		t.Errorf("error.type on a failed publish: %v (want the innermost error's type, not *fmt.wrapError)", send.Attributes())
	}
	ms := h.collect(t)
	p := metricPoint(t, ms, obsotel.MetricSent, map[string]string{"messaging.destination.name": "T"})
	if v, ok := p.attrs.Value("error.type"); !ok || v.String() == "" {
		t.Errorf("failed publish counted without error.type: %v", p.attrs)
	}
}

// A failure wrapping several errors at once (the store wraps its
// sentinel, then the driver's error: "%w: %w") is typed by the last, the
// driver's, not *fmt.wrapErrors.
func TestPublishFailureWrappingSeveralErrors(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	publish(t, h, "T", fmt.Errorf("outbox: publish x: %w", fmt.Errorf("insert: %w: %w", core.ErrDuplicateEvent, &core.ValidationError{Field: "id"})))
	if v, ok := attr(h.span(t, "send T").Attributes(), "error.type"); !ok || v.AsString() != "*core.ValidationError" {
		t.Errorf("error.type: %v, want the last wrapped error's type, not *fmt.wrapErrors", v.AsString())
	}
}

// An event whose traceparent header is set but empty (copied from a
// request that had none) gets the producer span's: its deliveries join
// the publisher's trace.
func TestPublishFillsAnEmptyTraceparent(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env := event(t, "T", map[string]string{"traceparent": ""})
	headers, done := h.obs.Publish(context.Background(), env)
	env, err := env.WithHeaders(headers)
	done(err)
	if err != nil {
		t.Fatal(err)
	}
	send := h.span(t, "send T")
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(env.Headers())))
	if sc.SpanID() != send.SpanContext().SpanID() {
		t.Errorf("the event's traceparent %q is not the producer span's", env.Headers()["traceparent"])
	}
}

func TestPublishKeepsTheEventsOwnTraceContext(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	const own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	env := event(t, "T", map[string]string{"traceparent": own})
	headers, done := h.obs.Publish(context.Background(), env)
	env, err := env.WithHeaders(headers)
	if err != nil {
		t.Fatal(err)
	}
	done(nil)
	if got := env.Headers()["traceparent"]; got != own {
		t.Errorf("traceparent = %q, want the event's own %q", got, own)
	}
	send := h.span(t, "send T")
	if len(send.Links()) != 1 || send.Links()[0].SpanContext.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("producer span links = %v, want the event's own context", send.Links())
	}
}

func TestDeliverStartsAConsumerSpanChildOfTheProducer(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env, root := publish(t, h, "OrderPlaced", nil)
	send := h.span(t, "send OrderPlaced")

	committed := time.Now().Add(-50 * time.Millisecond)
	ctx, end := h.obs.Deliver(context.Background(), core.Delivery{Event: env, Store: "eu", Path: core.PathCold, Attempt: 1, Committed: committed})
	inListener := trace.SpanFromContext(ctx).SpanContext()
	end(core.DeliveryResult{Outcome: core.OutcomeDone, Listeners: 3 * time.Millisecond})

	proc := h.span(t, "process OrderPlaced")
	if !proc.SpanContext().Equal(inListener) {
		t.Errorf("listener ctx carries span %v, want the consumer span %v", inListener.SpanID(), proc.SpanContext().SpanID())
	}
	if proc.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kind = %v, want consumer", proc.SpanKind())
	}
	if proc.Parent().SpanID() != send.SpanContext().SpanID() || proc.SpanContext().TraceID() != root.TraceID() {
		t.Errorf("consumer span's parent = %v, want the producer span %v in trace %v", proc.Parent().SpanID(), send.SpanContext().SpanID(), root.TraceID())
	}
	if !proc.Parent().IsRemote() {
		t.Errorf("consumer span's parent is not marked remote (it came from the event's headers)")
	}
	if len(proc.Links()) != 1 || proc.Links()[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
		t.Errorf("consumer span links = %v, want the producer span", proc.Links())
	}
	wantAttrs(t, "consumer span", proc.Attributes(), map[string]string{
		"messaging.system": "outbox", "messaging.operation.type": "process", "messaging.operation.name": "process",
		"messaging.destination.name": "OrderPlaced", "messaging.message.id": "ev-OrderPlaced",
		"outbox.attempt": "1", "outbox.path": "cold", "outbox.store": "eu", "outbox.outcome": "done",
	})
	if proc.Status().Code == codes.Error {
		t.Errorf("status = %v for a delivered event", proc.Status())
	}

	ms := h.collect(t)
	labels := map[string]string{"messaging.destination.name": "OrderPlaced", "outbox.store": "eu", "outbox.path": "cold"}
	if p := metricPoint(t, ms, obsotel.MetricLag, labels); p.value != 1 || p.sum < 0.05 {
		t.Errorf("%s: count %v sum %v, want one lag of at least 50ms", obsotel.MetricLag, p.value, p.sum)
	}
	done := map[string]string{"messaging.destination.name": "OrderPlaced", "outbox.store": "eu", "outbox.path": "cold", "outbox.outcome": "done"}
	if p := metricPoint(t, ms, obsotel.MetricProcess, done); p.value != 1 || p.sum != 0.003 {
		t.Errorf("%s: count %v sum %v, want one of 3ms", obsotel.MetricProcess, p.value, p.sum)
	}
	if p := metricPoint(t, ms, obsotel.MetricDeliveries, done); p.value != 1 {
		t.Errorf("%s = %v, want 1", obsotel.MetricDeliveries, p.value)
	}
}

func TestDeliverOutcomes(t *testing.T) {
	boom := errors.New("listener failed")
	for _, tc := range []struct {
		outcome core.Outcome
		err     error
		isError bool
	}{
		{core.OutcomeRetry, boom, true},
		{core.OutcomeDead, boom, true},
		{core.OutcomePutOff, core.Unavailable(boom, time.Second), false},
		{core.OutcomeUnhandled, nil, false},
		{core.OutcomeInterrupted, context.Canceled, false},
	} {
		t.Run(tc.outcome.String(), func(t *testing.T) {
			h := newHarness(t, obsotel.Config{})
			env, _ := publish(t, h, "T", nil)
			_, end := h.obs.Deliver(context.Background(), core.Delivery{Event: env, Path: core.PathHot, Attempt: 1})
			end(core.DeliveryResult{Outcome: tc.outcome, Err: tc.err, Listeners: time.Millisecond})
			proc := h.span(t, "process T")
			wantAttrs(t, "consumer span", proc.Attributes(), map[string]string{"outbox.outcome": tc.outcome.String(), "outbox.path": "hot"})
			if got := proc.Status().Code == codes.Error; got != tc.isError {
				t.Errorf("status %v, want error %v", proc.Status(), tc.isError)
			}
			if tc.isError && proc.Status().Description != boom.Error() {
				t.Errorf("status description %q, want %q", proc.Status().Description, boom.Error())
			}
			if _, ok := attr(proc.Attributes(), "error.type"); ok != tc.isError {
				t.Errorf("error.type present %v, want %v", ok, tc.isError)
			}
			if tc.err != nil && len(proc.Events()) == 0 {
				t.Errorf("the attempt's error is not recorded as a span event")
			}
			ms := h.collect(t)
			metricPoint(t, ms, obsotel.MetricDeliveries, map[string]string{"outbox.outcome": tc.outcome.String(), "messaging.destination.name": "T"})
		})
	}
}

func TestDeliverLinkOnlyStartsANewTrace(t *testing.T) {
	h := newHarness(t, obsotel.Config{LinkOnly: true})
	env, root := publish(t, h, "T", nil)
	send := h.span(t, "send T")
	_, end := h.obs.Deliver(context.Background(), core.Delivery{Event: env, Path: core.PathHot, Attempt: 1})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	proc := h.span(t, "process T")
	if proc.Parent().IsValid() || proc.SpanContext().TraceID() == root.TraceID() {
		t.Errorf("LinkOnly: consumer span has parent %v in trace %v, want a new root", proc.Parent(), proc.SpanContext().TraceID())
	}
	if len(proc.Links()) != 1 || proc.Links()[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
		t.Errorf("LinkOnly: links = %v, want the producer span", proc.Links())
	}
}

func TestDeliverWithoutTraceContextStartsARoot(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, end := h.obs.Deliver(ctx, core.Delivery{Event: event(t, "T", nil), Path: core.PathCold, Attempt: 1})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	cancel()
	if got.Err() == nil {
		t.Errorf("the listeners' context is not derived from the dispatcher's: cancelling it did not reach them")
	}
	proc := h.span(t, "process T")
	if proc.Parent().IsValid() || len(proc.Links()) != 0 {
		t.Errorf("consumer span of an event without trace context: parent %v links %v, want a root", proc.Parent(), proc.Links())
	}
}

func TestDeliverCarriesTheEventsBaggage(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env := event(t, "T", map[string]string{
		"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"baggage":     "tenant=acme",
	})
	ctx, end := h.obs.Deliver(context.Background(), core.Delivery{Event: env, Attempt: 1})
	defer end(core.DeliveryResult{Outcome: core.OutcomeDone})
	carrier := propagation.MapCarrier{}
	h.obs.InjectHeaders(ctx, carrier.Set)
	if carrier["baggage"] != "tenant=acme" {
		t.Errorf("baggage in the listeners' context = %q, want tenant=acme", carrier["baggage"])
	}
}

func TestInjectHeadersWritesTheCurrentSpan(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	ctx, span := h.tp.Tracer("test").Start(context.Background(), "delivery")
	defer span.End()
	got := map[string]string{}
	h.obs.InjectHeaders(ctx, func(k, v string) { got[k] = v })
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(got)))
	if sc.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("injected %v, want the span %v", got, span.SpanContext().SpanID())
	}
}

// Baggage travels from the publisher to the listeners also when the event
// carries no trace context, as with a no-op TracerProvider (metrics
// only): the delivery dropped it, having no span context to parent on.
func TestDeliverCarriesBaggageWithoutTraceContext(t *testing.T) {
	obs, err := obsotel.New(obsotel.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Propagator: w3c})
	if err != nil {
		t.Fatal(err)
	}
	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	headers, done := obs.Publish(baggage.ContextWithBaggage(context.Background(), bag), event(t, "T", nil))
	done(nil)
	if headers["baggage"] != "tenant=acme" || headers["traceparent"] != "" {
		t.Fatalf("Publish's headers %v, want the baggage alone", headers)
	}
	ctx, end := obs.Deliver(context.Background(), core.Delivery{Event: event(t, "T", headers), Attempt: 1})
	defer end(core.DeliveryResult{Outcome: core.OutcomeDone})
	if got := baggage.FromContext(ctx).Member("tenant").Value(); got != "acme" {
		t.Errorf("baggage tenant in the listeners' context = %q, want acme", got)
	}
}
