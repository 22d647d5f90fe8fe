package otel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay"
)

// The attributes of this package beyond the messaging conventions.
const (
	AttrAttempt = attribute.Key("outbox.attempt") // int: 1 for the first attempt
	AttrPath    = attribute.Key("outbox.path")    // "hot", "cold" or "retry"
	AttrStore   = attribute.Key("outbox.store")   // "" for an outbox's own database, the tenant's id in a set
	AttrOutcome = attribute.Key("outbox.outcome") // "done", "retry", "dead", "put_off", "unhandled", "interrupted"; an inbox's: "processed", "duplicate", "failed", "retry", "dead", "unhandled", "interrupted"
	AttrQueue   = attribute.Key("outbox.queue")   // "hot" or "cold"
	AttrStatus  = attribute.Key("outbox.status")  // "done" or "dead", of purged rows

	AttrInboxSource = attribute.Key("outbox.inbox.source") // the source of an inbox message (with messaging.message.id, its key)
	AttrInboxMode   = attribute.Key("outbox.inbox.mode")   // "transactional" or "queued"

	AttrRelayBroker = attribute.Key("outbox.relay.broker") // a broker relay's breaker name, e.g. "nats jetstream nats://127.0.0.1:4222" (relay.Metrics)
)

// System is the messaging.system of every span and measurement.
const System = "outbox"

var systemAttr = semconv.MessagingSystemKey.String(System)

// Observer traces and measures an outbox with OpenTelemetry. Create it
// with [New]; it is safe for concurrent use. Pass it as
// outbox.Config.Observer and outbox.Config.Metrics, as the Propagator and
// the Metrics of a broker relay, and as inbox.Config.Observer.
type Observer struct {
	*storeMetrics // the signals of the outbox's own store ("")

	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	linkOnly   bool
	inst       *instruments

	stores sync.Map // store id -> *storeMetrics
	sets   sync.Map // setKey -> *measureSet
	types  sync.Map // event type -> *typeInfo
	paths  sync.Map // pathKey -> *pathSets, for the stores of a set of databases
	topics sync.Map // inbox topic -> *topicInfo
	inbox  sync.Map // inboxKey -> *inboxSets, for the stores of a dispatcher of several inboxes
	relays sync.Map // broker -> *brokerInfo, for relay.Metrics

	ownStore *measureSet // DONE writes and claims of store "" that succeeded
}

var (
	_ core.Observer         = (*Observer)(nil)
	_ core.HeaderInjector   = (*Observer)(nil)
	_ core.Metrics          = (*Observer)(nil)
	_ core.StoreMetrics     = (*Observer)(nil)
	_ core.OpsMetrics       = (*Observer)(nil)
	_ core.UnhandledMetrics = (*Observer)(nil)
	_ core.OrderMetrics     = (*Observer)(nil)
	_ core.PostponeMetrics  = (*Observer)(nil)
	_ core.InboxObserver    = (*Observer)(nil)
	_ relay.Metrics         = (*Observer)(nil)
)

// New returns an Observer configured by cfg. An invalid cfg returns an
// error wrapping core.ErrInvalidConfig that names every bad field.
func New(cfg Config) (*Observer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	inst, err := newInstruments(cfg.MeterProvider.Meter(ScopeName))
	if err != nil {
		return nil, fmt.Errorf("otel: creating the instruments: %w", err)
	}
	o := &Observer{
		tracer:     cfg.TracerProvider.Tracer(ScopeName),
		propagator: cfg.Propagator,
		linkOnly:   cfg.LinkOnly,
		inst:       inst,
	}
	o.storeMetrics = o.newStoreMetrics("")
	o.ownStore = o.set(setKey{kind: kindStore})
	return o, nil
}

// Publish starts the PRODUCER span "send <event type>" as a child of
// ctx's span and returns its trace context as headers for the event; done
// ends the span, with an error status when Publish failed. An event that
// already carries a readable trace context keeps it
// (core.Envelope.WithHeaders keeps existing headers, except an empty or
// unreadable W3C traceparent) and the span links to it.
func (o *Observer) Publish(ctx context.Context, env core.Envelope) (map[string]string, func(error)) {
	ti := o.typeOf(env.Type())
	opts := make([]trace.SpanStartOption, 2, 4)
	opts[0], opts[1] = kindProducer, ti.sendAttrs
	if id := env.ID(); id != "" {
		opts = append(opts, trace.WithAttributes(semconv.MessagingMessageID(id)))
	}
	if sc := o.eventContext(env); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := o.tracer.Start(ctx, ti.sendName, opts...)
	headers := make(map[string]string, 2)
	o.propagator.Inject(ctx, propagation.MapCarrier(headers))
	done := func(err error) {
		set := ti.sent
		if err != nil {
			errType := errorType(err)
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
			set = o.set(setKey{kind: kindSent, typ: ti.typ, errType: errType})
		}
		span.End()
		o.inst.sent.Add(bg, 1, set.add...)
	}
	return headers, done
}

// Deliver starts the CONSUMER span "process <event type>" of one
// delivery attempt and returns the listeners' context carrying it. Its
// parent is the trace context of the event's headers (a new trace linked
// to it with Config.LinkOnly). For an event's first delivery (not
// core.Delivery.Redelivered) it records outbox.delivery.lag. end sets
// outbox.outcome, an error status for a failed attempt (retry, dead), and
// records the attempt's metrics: outbox.deliveries for every attempt,
// messaging.process.duration for every attempt whose listeners ran (not
// for outcome unhandled), both with error.type when it failed.
func (o *Observer) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	ti := o.typeOf(d.Event.Type())
	ds := o.deliverySets(ti, d.Store, d.Path)
	opts := make([]trace.SpanStartOption, 3, 6)
	opts[0], opts[1], opts[2] = kindConsumer, ti.processAttrs, ds.spanAttrs
	opts = append(opts, trace.WithAttributes(semconv.MessagingMessageID(d.Event.ID()), AttrAttempt.Int(d.Attempt)))
	parent := ctx
	if h := d.Event.RawHeaders(); len(h) > 0 {
		// One extraction gives both the parent (with the event's baggage,
		// also when the event has no trace context: a publisher under a
		// no-op tracer) and the link.
		extracted := o.propagator.Extract(ctx, propagation.MapCarrier(h))
		parent = extracted
		if sc := trace.SpanContextFromContext(extracted); sc.IsValid() && sc.IsRemote() && !sc.Equal(trace.SpanContextFromContext(ctx)) {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			if o.linkOnly {
				opts = append(opts, newRoot)
			}
		}
	}
	ctx, span := o.tracer.Start(parent, ti.processName, opts...)
	store, path := d.Store, d.Path // not d: the closure would move it to the heap
	if due := d.Due(); d.Attempt <= 1 && !d.Redelivered && !due.IsZero() {
		// The first delivery only: a retry's backoff, or the outage an
		// event was put off for, is no lag. Never negative: nodes'
		// clocks may disagree on a claimed row's insert time.
		o.inst.lag.Record(ctx, max(0, time.Since(due).Seconds()), ds.lag.rec...)
	}
	end := func(r core.DeliveryResult) {
		var errType string // a failed attempt's, "" for the others
		if r.Outcome == core.OutcomeRetry || r.Outcome == core.OutcomeDead {
			errType = failureType(r.Err)
		}
		endSpan(span, outcomeAttr(r.Outcome), errType, r.Err, "outbox.", r.Outcome.String())
		set := o.outcomeSet(ds, ti, store, path, r.Outcome, errType)
		if r.Outcome != core.OutcomeUnhandled { // else no listener ran: nothing to time
			o.inst.process.Record(bg, r.Listeners.Seconds(), set.rec...)
		}
		o.inst.deliveries.Add(bg, 1, set.add...)
	}
	return ctx, end
}

// ProcessInbox starts the CONSUMER span "process <topic>" ("process
// inbox" without a topic) of one processing of an inbox message, child of
// ctx's span, and returns the business function's or handler's context
// carrying it. In the transactional mode ctx is the consumer's own, which
// usually carries the broker message's trace context; a queued message's
// handler gets a context without one, so its span starts a trace.
//
// For a queued message's first handling it records the message's wait in
// the inbox (outbox.inbox.lag). end sets outbox.outcome and, for a failed
// processing (failed, retry, dead), an error status; it records the
// processing's metrics: outbox.inbox.processed for every processing,
// outbox.inbox.process.duration unless nothing ran (outcomes duplicate
// and unhandled, and core.InboxResult.NotRun). The inbox calls it: pass the Observer as
// inbox.Config.Observer or inbox.DispatcherConfig.Observer.
func (o *Observer) ProcessInbox(ctx context.Context, m core.InboxMessage) (context.Context, func(core.InboxResult)) {
	ti := o.topicOf(m.Topic)
	is := o.inboxSetsOf(ti, m.Store, m.Mode)
	var msg trace.SpanStartOption
	if m.Attempt > 0 {
		msg = trace.WithAttributes(semconv.MessagingMessageID(m.MessageID), AttrInboxSource.String(m.Source), AttrAttempt.Int(m.Attempt))
	} else {
		msg = trace.WithAttributes(semconv.MessagingMessageID(m.MessageID), AttrInboxSource.String(m.Source))
	}
	ctx, span := o.tracer.Start(ctx, ti.processName, kindConsumer, ti.processAttrs, is.spanAttrs, msg)
	store, mode := m.Store, m.Mode // not m: the closure would move it to the heap
	// A first handling only: a retry's backoff is no wait.
	if mode == core.InboxQueued && m.Attempt <= 1 && !m.Redelivered && !m.Enqueued.IsZero() {
		o.inst.inboxLag.Record(ctx, max(0, time.Since(m.Enqueued).Seconds()), is.lag.rec...)
	}
	end := func(r core.InboxResult) {
		var errType string // a failed processing's, "" for the others
		if r.Outcome == core.InboxFailed || r.Outcome == core.InboxRetry || r.Outcome == core.InboxDead {
			errType = failureType(r.Err)
		}
		endSpan(span, inboxOutcomeAttr(r.Outcome), errType, r.Err, "outbox.inbox.", r.Outcome.String())
		set := o.inboxOutcomeSet(is, ti, store, mode, r.Outcome, errType)
		if !r.NotRun && r.Outcome != core.InboxDuplicate && r.Outcome != core.InboxUnhandled { // else nothing ran
			o.inst.inboxProcess.Record(bg, r.Took.Seconds(), set.rec...)
		}
		o.inst.inboxProcessed.Add(bg, 1, set.add...)
	}
	return ctx, end
}

// endSpan ends a consumer span with its outcome's attributes: a failed
// outcome (errType set) sets an error status and error.type, with the
// error recorded when there is one; another outcome that carries an
// error (put off, interrupted) adds the event eventPrefix+outcome.
func endSpan(span trace.Span, outcome []attribute.KeyValue, errType string, err error, eventPrefix, name string) {
	if span.IsRecording() {
		span.SetAttributes(outcome...)
		switch {
		case errType != "" && err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		case errType != "":
			span.SetStatus(codes.Error, name)
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		case err != nil:
			span.AddEvent(eventPrefix+name, trace.WithAttributes(attribute.String("exception.message", err.Error())))
		}
	}
	span.End()
}

// DoneWritten records one coalesced DONE write: its size and duration.
func (o *Observer) DoneWritten(store string, n int, took time.Duration, err error) {
	set := o.storeSet(store, err)
	o.inst.doneBatch.Record(bg, int64(n), set.rec...)
	o.inst.doneWrite.Record(bg, took.Seconds(), set.rec...)
}

// Claimed records one claim of a poller: its duration and rows.
func (o *Observer) Claimed(store string, rows int, took time.Duration, err error) {
	set := o.storeSet(store, err)
	o.inst.claimRows.Record(bg, int64(rows), set.rec...)
	o.inst.claimTime.Record(bg, took.Seconds(), set.rec...)
}

// InjectHeaders writes the trace context of ctx into message headers
// through the Propagator: the broker relays call it so that a message
// carries the context of the delivery span that relayed it.
func (o *Observer) InjectHeaders(ctx context.Context, set func(key, value string)) {
	o.propagator.Inject(ctx, setCarrier(set))
}

// eventContext returns the trace context in env's headers (invalid when
// there is none).
func (o *Observer) eventContext(env core.Envelope) trace.SpanContext {
	h := env.RawHeaders()
	if len(h) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(o.propagator.Extract(context.Background(), propagation.MapCarrier(h)))
}

// errorType is the error.type of err: its Go type, past every context
// fmt.Errorf wrapped it in, the outbox's and the listener's own (the
// outbox wraps listener and publish errors so, and *fmt.wrapError tells
// nothing; of several errors wrapped at once,
// *fmt.wrapErrors, the last: the store wraps its sentinel, then the
// driver's error), "" for nil. It is predictable and of low cardinality,
// as the conventions ask.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	for {
		var next error
		switch t := fmt.Sprintf("%T", err); t {
		case "*fmt.wrapError":
			next = errors.Unwrap(err)
		case "*fmt.wrapErrors":
			if u, ok := err.(interface{ Unwrap() []error }); ok {
				if errs := u.Unwrap(); len(errs) > 0 {
					next = errs[len(errs)-1]
				}
			}
		default:
			return t
		}
		if next == nil {
			return fmt.Sprintf("%T", err)
		}
		err = next
	}
}

// failureType is the error.type of a failed operation: errorType(err),
// or "_OTHER" (the conventions' fallback) when it failed without an error.
func failureType(err error) string {
	if err == nil {
		return semconv.ErrorTypeOther.Value.AsString()
	}
	return errorType(err)
}

// setCarrier writes through a relay's set function; it reads nothing.
type setCarrier func(key, value string)

func (c setCarrier) Get(string) string     { return "" }
func (c setCarrier) Set(key, value string) { c(key, value) }
func (c setCarrier) Keys() []string        { return nil }
