package core

import (
	"context"
	"fmt"
	"time"
)

// Observer watches the outbox at work, for tracing and metrics with
// labels: the OpenTelemetry and Prometheus modules of this repository
// implement it, and so can anything else. Set it in outbox.Config.Observer
// (tenant.Config.Observer for a set of databases); nil means none, and
// then none of it costs anything.
//
// Every method runs on the outbox's own paths (publish, the dispatcher's
// workers and DONE writer, the poller): it must be fast, must not block
// and must be safe for concurrent use. The dispatcher survives a
// Deliver, or the end it returned, that panics: it logs the panic and
// delivers the event unobserved (and a nil context from Deliver is taken
// as the one it was given, a nil end as none; a nil done from Publish is
// not called). A panic in another method is not recovered: one in Publish
// or its done reaches the publishing call (InTx rolls its transaction
// back); one in DoneWritten or Claimed, which run on the library's own
// goroutines, ends the process, as a panic in any goroutine does. Embed
// [NopObserver] in an
// implementation so that methods added later keep it compiling.
type Observer interface {
	// Publish is called by Publish before the event is inserted, with the
	// publisher's context. It returns headers to add to the event, such as
	// the W3C trace context ("traceparent", "tracestate") of ctx so that
	// its deliveries join the publisher's trace, or nil; and a function
	// that Publish calls exactly once, with nil when the event was
	// inserted or with the error Publish returns. Every Publish is
	// reported, also one that fails before the insert (no transaction, an
	// invalid envelope: env may then be invalid, even the zero Envelope;
	// its done is called at once). Headers the event already has are kept,
	// unless their value is empty, or the event's trace context is not a
	// valid W3C "traceparent" and the Observer returns one (see
	// [Envelope.WithHeaders]); invalid ones fail Publish.
	Publish(ctx context.Context, env Envelope) (headers map[string]string, done func(err error))
	// Deliver is called before the listeners of one delivery attempt run,
	// with the context they would get. The context it returns is the one
	// they get (carrying, for example, a consumer span whose parent or
	// link is the trace context in the event's headers): it must be ctx
	// or derived from it, so that shutdown still cancels the listeners.
	// end is called exactly once when the attempt's outcome is decided.
	Deliver(ctx context.Context, d Delivery) (context.Context, func(DeliveryResult))
	// DoneWritten reports one coalesced DONE write of store: n events,
	// how long the statement took, its error.
	DoneWritten(store string, n int, took time.Duration, err error)
	// Claimed reports one claim of the poller in store: rows claimed
	// (newly taken: rows this node's dispatcher already held, read again
	// by the claim, are not counted), how long the claim took, its error.
	// It is called once the claimed rows are handed to the dispatcher, so
	// their deliveries may be reported (Deliver) before it.
	Claimed(store string, rows int, took time.Duration, err error)
}

// Path is how an event reached a dispatcher worker.
type Path uint8

// The paths of a delivery.
const (
	PathHot   Path = iota // handed over right after its transaction committed
	PathCold              // claimed by a poller
	PathRetry             // an in-process retry whose delay elapsed
)

// String returns "hot", "cold", "retry", or Path(n) for another value.
func (p Path) String() string {
	switch p {
	case PathHot:
		return "hot"
	case PathCold:
		return "cold"
	case PathRetry:
		return "retry"
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// Delivery describes one delivery attempt for an [Observer].
type Delivery struct {
	Event Envelope
	// Store is the store the event came from: "" for an outbox's own
	// database, the tenant's id in a set of databases.
	Store string
	Path  Path
	// Attempt is 1 for the first attempt, 2 for the first retry, and so on.
	Attempt int
	// Committed is when the event's transaction committed as far as this
	// process knows: the hand-over after commit on the hot path, the
	// row's insert time for a claimed event. For a claimed event never
	// handed to listeners whose row became due later than its insert,
	// it is that time (the row's available_at): a delayed event's
	// NotBefore, which an envelope read back from the store does not
	// carry, or the time the event was replayed. Zero when unknown.
	Committed time.Time
	// Redelivered reports that the event was handed to listeners before:
	// every attempt after the first (Attempt > 1), and the first attempt
	// of an event that came back without an attempt charged, because it
	// was put off (a listener's downstream was unavailable,
	// OutcomePutOff) or left for a listener registered later
	// (dispatcher.UnhandledLeave). The row tells those (a store that
	// implements [Postponer] records why it was put off), so this holds
	// whichever process claims the event, this one, a restarted one or
	// another node. It is false where neither this process nor the row
	// can tell: an event whose delivery was interrupted
	// (OutcomeInterrupted), whose DONE write failed or whose node died
	// before writing the outcome, an event replayed from DEAD (a replay
	// starts afresh), and an event put off in a store without Postponer.
	// Latency from commit to listener is measured only for deliveries
	// that are not redelivered: the outage or wait in between is not lag.
	Redelivered bool
}

// Due is when the event could first be delivered: Committed, or its
// NotBefore when that is later (a delayed event waits for it by design).
// Zero when Committed is unknown. Latency from commit to listener is
// measured from Due, so a delay is not counted as lag.
func (d Delivery) Due() time.Time {
	if d.Committed.IsZero() {
		return time.Time{}
	}
	if nb := d.Event.NotBefore(); nb.After(d.Committed) {
		return nb
	}
	return d.Committed
}

// Outcome is what became of a delivery attempt.
type Outcome uint8

// The outcomes of a delivery attempt.
const (
	// OutcomeDone: every listener succeeded; the DONE write follows,
	// coalesced with others.
	OutcomeDone Outcome = iota
	// OutcomeRetry: a listener failed; the event is retried later.
	OutcomeRetry
	// OutcomeDead: a listener failed on the last attempt; the event is DEAD.
	OutcomeDead
	// OutcomePutOff: a listener's downstream was unavailable
	// ([Unavailable]); the event is put off without charging an attempt.
	OutcomePutOff
	// OutcomeUnhandled: no listener is registered for the event's type;
	// dispatcher.Config.Unhandled decided what happened to it.
	OutcomeUnhandled
	// OutcomeInterrupted: shutdown interrupted the delivery, or its
	// outcome could not be written; the event is delivered again later.
	OutcomeInterrupted
)

// String returns "done", "retry", "dead", "put_off", "unhandled",
// "interrupted", or Outcome(n) for another value.
func (o Outcome) String() string {
	switch o {
	case OutcomeDone:
		return "done"
	case OutcomeRetry:
		return "retry"
	case OutcomeDead:
		return "dead"
	case OutcomePutOff:
		return "put_off"
	case OutcomeUnhandled:
		return "unhandled"
	case OutcomeInterrupted:
		return "interrupted"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// DeliveryResult is the outcome of a delivery attempt, for an [Observer].
type DeliveryResult struct {
	Outcome Outcome
	// Err is the failure (nil for OutcomeDone).
	Err error
	// Listeners is how long the listeners ran: zero for
	// OutcomeUnhandled, where none ran.
	Listeners time.Duration
}

// NopObserver observes nothing. Embed it in an [Observer] implementation.
type NopObserver struct{}

var _ Observer = NopObserver{}

// Publish returns no headers.
func (NopObserver) Publish(context.Context, Envelope) (map[string]string, func(error)) {
	return nil, func(error) {}
}

// Deliver returns ctx unchanged.
func (NopObserver) Deliver(ctx context.Context, _ Delivery) (context.Context, func(DeliveryResult)) {
	return ctx, func(DeliveryResult) {}
}

// DoneWritten does nothing.
func (NopObserver) DoneWritten(string, int, time.Duration, error) {}

// Claimed does nothing.
func (NopObserver) Claimed(string, int, time.Duration, error) {}

// WithHeaders returns a copy of e with the headers h added; a key e has
// already keeps e's value, unless that value is empty (a header copied
// from a request that had none, say "traceparent": ""), which h's value
// replaces. Likewise, when h has a "traceparent", e's own is replaced if
// it is not a valid W3C Trace Context value (malformed, an all-zero id,
// version ff: one a propagator discards), and e's "tracestate" with it
// (by h's, or removed when h has none), as Trace Context asks of a
// receiver of an invalid traceparent: otherwise the event would carry a
// trace context no one can read and its deliveries would join no trace.
// An invalid key or value returns an error
// wrapping [ErrInvalidHeader], a key over MaxHeaderKeyLen characters
// [ErrHeaderKeyTooLong], and headers that together exceed
// MaxHeadersBytes [ErrHeadersTooLarge]; e is unchanged either way.
func (e Envelope) WithHeaders(h map[string]string) (Envelope, error) {
	if len(h) == 0 {
		return e, nil
	}
	merged := make(map[string]string, len(e.headers)+len(h))
	for k, v := range h {
		if k == "" {
			return Envelope{}, invalid("headers", ErrInvalidHeader, "empty key")
		}
		if !cleanText(k) || !cleanText(v) {
			return Envelope{}, invalid("headers", ErrInvalidHeader, "key or value is not valid UTF-8 or contains NUL")
		}
		if err := checkHeaderKey(k); err != nil {
			return Envelope{}, err
		}
		merged[k] = v
	}
	// The event's trace context yields to h's when a propagator cannot
	// read it.
	_, hasParent := h[headerTraceparent]
	own, hasOwn := e.headers[headerTraceparent]
	yield := hasParent && hasOwn && own != "" && !validTraceparent(own)
	for k, v := range e.headers {
		if yield && (k == headerTraceparent || k == headerTracestate) {
			continue // h's, or none for a tracestate h lacks
		}
		if _, ok := merged[k]; !ok || v != "" {
			merged[k] = v // the event's own, unless empty where h sets one
		}
	}
	if err := checkHeadersSize(merged); err != nil {
		return Envelope{}, err
	}
	e.headers = merged
	return e, nil
}

// HeaderInjector writes the trace context of ctx into message headers.
// An [Observer] that propagates traces implements it (the OpenTelemetry
// module's does); the broker relays call it for every message they send,
// so that a consumer's spans join the trace of the delivery that relayed
// the message.
type HeaderInjector interface {
	InjectHeaders(ctx context.Context, set func(key, value string))
}
