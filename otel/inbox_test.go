package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-go/outbox/core"
	obsotel "github.com/outbox-go/outbox/otel"
)

// The transactional mode runs under the consumer's context: the span is a
// child of the caller's span, and the business function gets it.
func TestProcessInboxTransactionalIsAChildOfTheCaller(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	ctx, root := h.tp.Tracer("test").Start(context.Background(), "receive OrderPlaced", trace.WithSpanKind(trace.SpanKindConsumer))
	got, end := h.obs.ProcessInbox(ctx, core.InboxMessage{Source: "orders", MessageID: "m-1", Topic: "OrderPlaced", Mode: core.InboxTransactional})
	inBusiness := trace.SpanFromContext(got).SpanContext()
	end(core.InboxResult{Outcome: core.InboxProcessed, Took: 2 * time.Millisecond})
	root.End()

	proc := h.span(t, "process OrderPlaced")
	if !proc.SpanContext().Equal(inBusiness) {
		t.Errorf("business ctx carries span %v, want the consumer span %v", inBusiness.SpanID(), proc.SpanContext().SpanID())
	}
	if proc.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kind = %v, want consumer", proc.SpanKind())
	}
	if proc.Parent().SpanID() != root.SpanContext().SpanID() || proc.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("parent = %v in trace %v, want the caller's span %v", proc.Parent().SpanID(), proc.SpanContext().TraceID(), root.SpanContext().SpanID())
	}
	wantAttrs(t, "inbox span", proc.Attributes(), map[string]string{
		"messaging.system": "outbox", "messaging.operation.type": "process", "messaging.operation.name": "process",
		"messaging.destination.name": "OrderPlaced", "messaging.message.id": "m-1",
		"outbox.inbox.source": "orders", "outbox.inbox.mode": "transactional", "outbox.outcome": "processed",
	})
	for _, k := range []string{"outbox.attempt", "outbox.store", "error.type"} {
		if v, ok := attr(proc.Attributes(), attribute.Key(k)); ok {
			t.Errorf("transactional span has %s = %v", k, v.String())
		}
	}
	if proc.Status().Code == codes.Error {
		t.Errorf("status = %v for a processed message", proc.Status())
	}
	if len(proc.Links()) != 0 {
		t.Errorf("links = %v, want none", proc.Links())
	}
}

// A queued handler's context carries no span: its span starts a trace.
// A retry is an error, with its type and the attempt.
func TestProcessInboxQueuedRetry(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	boom := errors.New("handler failed")
	_, end := h.obs.ProcessInbox(context.Background(), core.InboxMessage{Source: "billing", MessageID: "m-2", Topic: "InvoiceDue",
		Store: "eu", Mode: core.InboxQueued, Attempt: 3, Enqueued: time.Now()})
	end(core.InboxResult{Outcome: core.InboxRetry, Err: boom, Took: time.Millisecond})

	proc := h.span(t, "process InvoiceDue")
	if proc.Parent().IsValid() {
		t.Errorf("parent = %v, want a root span", proc.Parent())
	}
	wantAttrs(t, "inbox span", proc.Attributes(), map[string]string{
		"messaging.destination.name": "InvoiceDue", "messaging.message.id": "m-2", "outbox.inbox.source": "billing",
		"outbox.inbox.mode": "queued", "outbox.store": "eu", "outbox.attempt": "3", "outbox.outcome": "retry",
		"error.type": "*errors.errorString",
	})
	if proc.Status().Code != codes.Error || proc.Status().Description != boom.Error() {
		t.Errorf("status = %v, want Error %q", proc.Status(), boom.Error())
	}
	if len(proc.Events()) != 1 || proc.Events()[0].Name != "exception" {
		t.Errorf("events = %v, want the recorded error", proc.Events())
	}
}

func TestProcessInboxOutcomes(t *testing.T) {
	boom := errors.New("business failed")
	for _, tc := range []struct {
		mode    core.InboxMode
		outcome core.InboxOutcome
		err     error
		isError bool
	}{
		{core.InboxTransactional, core.InboxProcessed, nil, false},
		{core.InboxTransactional, core.InboxDuplicate, nil, false},
		{core.InboxTransactional, core.InboxFailed, boom, true},
		{core.InboxQueued, core.InboxDuplicate, nil, false},
		{core.InboxQueued, core.InboxRetry, boom, true},
		{core.InboxQueued, core.InboxDead, boom, true},
		{core.InboxQueued, core.InboxDead, nil, true},
		{core.InboxQueued, core.InboxUnhandled, nil, false},
		{core.InboxQueued, core.InboxInterrupted, context.Canceled, false},
	} {
		t.Run(tc.mode.String()+"/"+tc.outcome.String(), func(t *testing.T) {
			h := newHarness(t, obsotel.Config{})
			_, end := h.obs.ProcessInbox(context.Background(), core.InboxMessage{Source: "s", MessageID: "m", Topic: "T", Mode: tc.mode, Attempt: int(tc.mode)})
			end(core.InboxResult{Outcome: tc.outcome, Err: tc.err})
			proc := h.span(t, "process T")
			wantAttrs(t, "inbox span", proc.Attributes(), map[string]string{"outbox.outcome": tc.outcome.String(), "outbox.inbox.mode": tc.mode.String()})
			if got := proc.Status().Code == codes.Error; got != tc.isError {
				t.Errorf("status %v, want error %v", proc.Status(), tc.isError)
			}
			// A failure without an error is of the conventions' type _OTHER.
			if et, ok := attr(proc.Attributes(), "error.type"); ok != tc.isError || (ok && tc.err == nil && et.AsString() != "_OTHER") {
				t.Errorf("error.type %q present %v, want %v", et.AsString(), ok, tc.isError)
			}
			if tc.err != nil && len(proc.Events()) == 0 {
				t.Errorf("the processing's error is not recorded as a span event")
			}
			if tc.err == nil && len(proc.Events()) != 0 {
				t.Errorf("span events %v without an error", proc.Events())
			}
			metricPoint(t, h.collect(t), obsotel.MetricInboxProcessed, map[string]string{"outbox.outcome": tc.outcome.String(), "messaging.destination.name": "T"})
		})
	}
}

func TestProcessInboxMetrics(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	boom := errors.New("failed")
	enqueued := time.Now()
	for _, p := range []struct {
		m core.InboxMessage
		r core.InboxResult
	}{
		{core.InboxMessage{Topic: "T", Mode: core.InboxTransactional}, core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond}},
		{core.InboxMessage{Topic: "T", Mode: core.InboxTransactional}, core.InboxResult{Outcome: core.InboxProcessed, Took: 3 * time.Millisecond}},
		{core.InboxMessage{Topic: "T", Mode: core.InboxTransactional}, core.InboxResult{Outcome: core.InboxDuplicate}},
		{core.InboxMessage{Topic: "T", Mode: core.InboxTransactional}, core.InboxResult{Outcome: core.InboxFailed, Err: boom, Took: time.Millisecond}},
		{core.InboxMessage{Topic: "T", Mode: core.InboxQueued, Attempt: 1, Enqueued: enqueued}, core.InboxResult{Outcome: core.InboxRetry, Err: boom, Took: time.Millisecond}},
		{core.InboxMessage{Topic: "T", Mode: core.InboxQueued, Attempt: 2, Enqueued: enqueued}, core.InboxResult{Outcome: core.InboxProcessed, Took: 2 * time.Millisecond}},
		{core.InboxMessage{Topic: "T", Mode: core.InboxQueued, Attempt: 1}, core.InboxResult{Outcome: core.InboxProcessed}}, // no Enqueued: no lag
		{core.InboxMessage{Topic: "T", Store: "eu", Mode: core.InboxQueued, Attempt: 1, Enqueued: enqueued}, core.InboxResult{Outcome: core.InboxDead, Err: boom}},
		{core.InboxMessage{Topic: "T", Mode: core.InboxMode(7), Attempt: 1}, core.InboxResult{Outcome: core.InboxOutcome(42)}},
	} {
		_, end := h.obs.ProcessInbox(t.Context(), p.m)
		end(p.r)
	}

	ms := h.collect(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		value  float64 // the count for a histogram
		sum    float64 // checked for the process duration only
	}{
		{obsotel.MetricInboxProcessed, map[string]string{"outbox.inbox.mode": "transactional", "outbox.outcome": "processed"}, 2, 2},
		{obsotel.MetricInboxProcessed, map[string]string{"outbox.inbox.mode": "transactional", "outbox.outcome": "duplicate"}, 1, 1},
		{obsotel.MetricInboxProcessed, map[string]string{"outbox.inbox.mode": "transactional", "outbox.outcome": "failed"}, 1, 1},
		{obsotel.MetricInboxProcessed, map[string]string{"outbox.inbox.mode": "queued", "outbox.outcome": "retry"}, 1, 1},
		{obsotel.MetricInboxProcessed, map[string]string{"outbox.inbox.mode": "queued", "outbox.outcome": "processed"}, 2, 2},
		{obsotel.MetricInboxProcessed, map[string]string{"outbox.inbox.mode": "queued", "outbox.outcome": "dead", "outbox.store": "eu"}, 1, 1},
		{obsotel.MetricInboxProcessed, map[string]string{"outbox.inbox.mode": "InboxMode(7)", "outbox.outcome": "InboxOutcome(42)"}, 1, 1},
		{obsotel.MetricInboxProcess, map[string]string{"outbox.inbox.mode": "transactional", "outbox.outcome": "processed"}, 2, 0.004},
		{obsotel.MetricInboxProcess, map[string]string{"outbox.inbox.mode": "queued", "outbox.outcome": "processed"}, 2, 0.002},
		{obsotel.MetricInboxProcess, map[string]string{"outbox.inbox.mode": "queued", "outbox.outcome": "retry"}, 1, 0.001},
	} {
		p := metricPoint(t, ms, c.name, c.labels)
		if p.value != c.value || (c.name == obsotel.MetricInboxProcess && p.sum != c.sum) {
			t.Errorf("%s%v = %v (sum %v), want %v (sum %v)", c.name, c.labels, p.value, p.sum, c.value, c.sum)
		}
	}
	processed := points(t, ms[obsotel.MetricInboxProcessed])
	if len(processed) != 7 {
		t.Errorf("%s: %d data points, want 7", obsotel.MetricInboxProcessed, len(processed))
	}
	for _, p := range processed {
		if v, ok := p.attrs.Value("messaging.destination.name"); !ok || v.AsString() != "T" {
			t.Errorf("%s: data point %v without the topic", obsotel.MetricInboxProcessed, encoded(p.attrs))
		}
		out, _ := p.attrs.Value("outbox.outcome")
		failed := map[string]bool{"failed": true, "retry": true, "dead": true}[out.AsString()]
		if et, ok := p.attrs.Value("error.type"); ok != failed || (ok && et.AsString() != "*errors.errorString") {
			t.Errorf("%s: data point %v: error.type present %v, want %v", obsotel.MetricInboxProcessed, encoded(p.attrs), ok, failed)
		}
		if v, ok := p.attrs.Value("outbox.store"); ok && v.AsString() != "eu" {
			t.Errorf("%s: data point %v labelled with an empty store", obsotel.MetricInboxProcessed, encoded(p.attrs))
		}
	}
	// Only the first handlings of queued messages with an Enqueued time
	// wait: one in store "", one in "eu"; the lag carries no outcome.
	lag := points(t, ms[obsotel.MetricInboxLag])
	if len(lag) != 2 {
		t.Fatalf("%s: %d data points, want 2 (by store)", obsotel.MetricInboxLag, len(lag))
	}
	for _, p := range lag {
		if v, ok := p.attrs.Value("outbox.inbox.mode"); !ok || v.AsString() != "queued" {
			t.Errorf("%s: data point %v not of the queued mode", obsotel.MetricInboxLag, encoded(p.attrs))
		}
		if _, ok := p.attrs.Value("outbox.outcome"); ok {
			t.Errorf("%s: data point %v labelled with an outcome", obsotel.MetricInboxLag, encoded(p.attrs))
		}
	}
	if p := metricPoint(t, ms, obsotel.MetricInboxLag, map[string]string{"outbox.inbox.mode": "queued", "outbox.store": "eu"}); p.value != 1 {
		t.Errorf("%s in store eu: count %v, want 1", obsotel.MetricInboxLag, p.value)
	}
	total := 0.0
	for _, p := range lag {
		total += p.value
	}
	if total != 2 {
		t.Errorf("%s: %v measurements, want 2", obsotel.MetricInboxLag, total)
	}
}

// A message without a topic is processed under "process inbox", without
// a destination.
func TestProcessInboxWithoutTopic(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	_, end := h.obs.ProcessInbox(context.Background(), core.InboxMessage{Source: "s", MessageID: "m"})
	end(core.InboxResult{Outcome: core.InboxProcessed})
	proc := h.span(t, "process inbox")
	wantAttrs(t, "inbox span", proc.Attributes(), map[string]string{
		"messaging.system": "outbox", "messaging.operation.type": "process", "messaging.message.id": "m",
		"outbox.inbox.mode": "transactional", "outbox.outcome": "processed",
	})
	if v, ok := attr(proc.Attributes(), "messaging.destination.name"); ok {
		t.Errorf("messaging.destination.name = %q without a topic", v.AsString())
	}
	p := metricPoint(t, h.collect(t), obsotel.MetricInboxProcessed, map[string]string{"outbox.outcome": "processed"})
	if _, ok := p.attrs.Value("messaging.destination.name"); ok || p.value != 1 {
		t.Errorf("%s: %v = %v, want 1 without a destination", obsotel.MetricInboxProcessed, encoded(p.attrs), p.value)
	}
}

func TestProcessInboxIsSafeForConcurrentUse(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range 200 {
				_, end := h.obs.ProcessInbox(t.Context(), core.InboxMessage{Topic: []string{"a", "b", ""}[j%3], Store: []string{"", "eu"}[i%2],
					Mode: core.InboxMode(j % 2), Attempt: j % 2, Enqueued: time.Now()})
				end(core.InboxResult{Outcome: core.InboxOutcome(j % 7)})
			}
		}()
	}
	for range 8 {
		<-done
	}
	total := 0.0
	for _, p := range points(t, h.collect(t)[obsotel.MetricInboxProcessed]) {
		total += p.value
	}
	if total != 8*200 {
		t.Errorf("%s total = %v, want %d", obsotel.MetricInboxProcessed, total, 8*200)
	}
}

// encoded returns s as text, for failure messages.
func encoded(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }
