// Package otel traces and measures an outbox, and an inbox, with OpenTelemetry.
//
// [New] returns an [*Observer] that is at once a core.Observer (spans),
// a core.HeaderInjector (trace context for the broker relays), a
// core.Metrics with every optional signal and per-store labels
// (core.StoreMetrics), a core.InboxObserver (the inbox's spans and
// metrics) and a relay.Metrics (a broker relay's own state). Pass the
// same value as outbox.Config.Observer and outbox.Config.Metrics
// (tenant.Config likewise), as the Propagator and the Metrics of a natsjs
// or rabbitmq relay, and as inbox.Config.Observer (which
// inbox.DispatcherConfig.Observer defaults to).
//
// # Traces
//
// Spans follow the OpenTelemetry messaging semantic conventions, with
// messaging.system "outbox" and the event type as the destination:
//
//   - Publish starts a PRODUCER span "send <event type>", child of the
//     publisher's span, ended when the event is inserted (or Publish
//     fails). Its context is written into the event's headers through the
//     Propagator (traceparent and tracestate with the W3C propagator),
//     unless the event already carries a trace context of its own: then
//     that one is kept and the producer span links to it. An empty
//     traceparent, or one the W3C propagator cannot read (malformed, an
//     all-zero id), is replaced, with its tracestate.
//   - Every delivery attempt runs its listeners under a CONSUMER span
//     "process <event type>". By default its parent is the trace context
//     of the event's headers, so the publisher's request, the publish, each
//     attempt (hot, retried, or claimed by a poller after a restart) and
//     what the listeners do form one trace; the span also links to that
//     context, as the conventions ask of a "process" span. With
//     Config.LinkOnly each attempt starts a trace of its own that only
//     links to the publisher's, for events retried for days whose traces
//     would otherwise grow without end.
//
// The broker relays (natsjs, rabbitmq) with this Observer as their
// Propagator write the delivery span's context into the broker message,
// so a consumer of the stream continues the same trace.
//
// On the consuming side, every processing of an inbox message runs under
// a CONSUMER span "process <topic>" ("process inbox" when the message has
// no topic), child of the span of the context it is given. In the
// transactional mode (ProcessTx, Process) that is the consumer's own
// context, which usually carries the broker message's trace context, so
// the trace goes on from the outbox's delivery through the broker to the
// business function; a queued message's handler (inbox.Dispatcher) starts
// a trace of its own. The span carries messaging.system "outbox",
// messaging.operation.type and messaging.operation.name "process",
// messaging.destination.name (the topic, when there is one),
// messaging.message.id and outbox.inbox.source (the message's key),
// outbox.inbox.mode ("transactional" or "queued"), outbox.store (the
// inbox of a dispatcher of several, or the database of a tenant set, when
// set), outbox.attempt (queued
// messages) and, at its end, outbox.outcome: "processed", "duplicate",
// "failed", "retry", "dead", "unhandled" or "interrupted". A failed,
// retried or dead processing sets an error status and error.type.
//
// # Metrics
//
// Instruments are created once, in New; attribute sets are built once
// per combination and reused. Event types are metric labels: keep their
// number bounded (they are in any reasonable application). The Metric*
// constants name every instrument and say what it measures; labels are
// messaging.destination.name (the event type), outbox.store, outbox.path,
// outbox.outcome, outbox.queue, outbox.status, error.type and
// outbox.relay.broker.
//
// A failed delivery attempt (outcome retry or dead) is counted and timed
// with error.type, as the conventions require of a failed operation: the
// Go type of the listener's error past the fmt.Errorf wrapping the outbox
// adds ("*net.OpError", say), or "_OTHER" without one. So is a failed
// inbox processing (failed, retry, dead). Other outcomes carry none, also
// when they report an error (put_off, interrupted: nothing failed).
//
// outbox.delivery.lag measures an event's first delivery only, from its
// commit (or NotBefore) to the start of the attempt: not a retry, whose
// backoff is no lag, nor an event back after it was put off or left for a
// listener (core.Delivery.Redelivered), whose outage or wait is not
// either.
//
// The duration histograms time what ran: an attempt that found no
// listener (outcome unhandled) is counted in outbox.deliveries but not
// recorded in messaging.process.duration, and an inbox message processed
// before (duplicate) or without a handler (unhandled), or whose
// processing ended before its function or handler ran
// (core.InboxResult.NotRun), is counted in outbox.inbox.processed but not
// timed, so that their zeros do not drag the histograms down.
//
// An inbox's processings are counted by outbox.inbox.processed and timed
// by outbox.inbox.process.duration (how long the business function or
// handler ran, when one ran), both labelled with messaging.destination.name (the
// topic, when there is one, so keep topics bounded too),
// outbox.inbox.mode, outbox.outcome and outbox.store (when set);
// outbox.inbox.lag, with the same labels but outbox.outcome, measures a
// queued message's wait from Enqueue (or its DueAt, when later) to the
// start of its first handling.
//
// A natsjs or rabbitmq relay given the Observer as its Config.Metrics
// reports its own state, labelled outbox.relay.broker: the relay's breaker
// name, its kind and server address without credentials, such as "nats
// jetstream nats://127.0.0.1:4222". outbox.relay.broker.up is 1 from the
// relay's creation, 0 from the publish that could not reach the broker,
// beginning an outage, to the first one the broker answers; the relay
// learns of its broker from its publishes, so an idle relay goes on
// reporting its last state. outbox.relay.outages counts the outages
// begun, one per incident however many publishes fail in it.
// outbox.relay.full_destinations is how many of the broker's destinations
// (a stream or queue at its limit) refuse messages for want of room while
// the broker is up; their events are put off (outbox.put_offs) until they
// have room. Relays of one name (two relays to the same server) share its
// attributes, the last report winning: give them names apart
// (BreakerConfig.Name, through the relay's Config.Breaker).
package otel
