// Package rabbitmq relays outbox events to RabbitMQ over AMQP 0-9-1, with
// publisher confirms: an event counts as delivered (its row DONE) only
// once the broker confirmed its message.
//
// Register a [Relay] on an outbox for the event types it should forward:
//
//	rl, err := rabbitmq.New(ctx, rabbitmq.Config{
//		URL:        "amqp://guest:guest@127.0.0.1:5672/",
//		Exchange:   "events",          // must exist; "" is the default exchange
//		RoutingKey: "orders.{type}",   // templates over the event's fields
//	})
//	if err != nil { return err }
//	ob.RegisterAll(rl) // or ob.Register("OrderPlaced", rl)
//	...
//	ob.Close(ctx)      // first the outbox, then the relay
//	rl.Close(ctx)
//
// # Messages
//
// Each event becomes one persistent message (delivery mode 2) with the
// event id as message_id (deduplicate on it: delivery is at least once),
// the event type as type, the occurred-at time as timestamp,
// content_type application/json for a JSON payload, and as headers the
// Outbox-* metadata of relay.Headers plus the event's own headers (the
// W3C trace context "traceparent" among them). The metadata is the
// relay's: an event header (or a Propagator's) named like one of its
// headers, in any case, is dropped. An event header named "CC" or "BCC"
// (in this case: RabbitMQ's sender-selected distribution headers, arrays
// of further routing keys) fails the event with [ErrInvalidMessage]
// before anything is sent, and so does an event whose type or a header
// name is longer than AMQP's short strings, 255 bytes (the outbox takes
// up to 128 characters, up to 512 bytes: keep those of relayed events
// within 255 bytes). The body is the payload.
//
// # Outcomes
//
// A message is published as mandatory (unless Config.AllowUnroutable):
// one no queue is bound for is returned by the broker and the event fails
// with [ErrUnroutable]. A missing exchange or a refused access
// ([ErrRefused]) and a message AMQP cannot carry ([ErrInvalidMessage])
// fail the event too: it is retried with backoff and ends DEAD after the
// outbox's MaxAttempts. A nack ([ErrNacked]: a queue full with overflow
// reject-publish, or a queue that failed) is no refusal of the message:
// the event is put off without charging an attempt until the queue takes
// it, and the other exchanges' and routing keys' events go on (one ERROR
// per incident, one INFO when it ends; see ErrNacked). RabbitMQ does not
// say why it nacks: a message larger than a queue's x-max-length-bytes,
// which no room made could take, is nacked for ever and waits the same
// way; keep that limit above the largest event.
//
// When the broker cannot be reached (no connection, a connection lost
// while a confirm was awaited, no confirm within ConfirmTimeout or before
// the listener's deadline, a connection blocked by a resource alarm) the
// event is not charged: the relay returns a core.Unavailable error, and
// the outbox puts the event off and delivers it again later. The
// relay.Breaker behind it logs one ERROR when such an incident begins and
// one INFO "broker recovered" line once publishes have been confirmed for
// its Settle (10 s by default) after the last outage, while events flow
// again from the first confirm; meanwhile
// one event per probe interval tries the broker and the others are put
// off at once. An event whose deadline ends while it waits for one of the
// MaxInFlight slots is put off too, without opening the breaker.
//
// # Connection and channels
//
// amqp091-go does not reconnect by itself (unless its experimental
// Recovery is configured, which this relay does not use): the relay
// watches its connection and, once it is lost, dials again in the
// background with exponential backoff (ReconnectDelay up to
// ReconnectMaxDelay). Publishes are spread over Config.Channels channels
// in confirm mode; a channel the broker closed because of a message (404
// NOT_FOUND for a missing exchange, 406 PRECONDITION_FAILED) is replaced
// on its next use. The message fails with ErrRefused when the broker's
// reason names its exchange or when it was the only one on the channel
// the broker had not answered; every other message that was waiting on
// the channel is published again alone, one at a time on one more
// channel, where a refusal can only be its own: so one bad event fails
// itself, not its neighbours, and ends DEAD like any refusal. A
// neighbour the broker had routed before it closed the channel, but not
// yet confirmed, is delivered twice (consumers deduplicate on
// message_id). An event whose channel was closed under it five times
// (possible only when publishes gave up on their confirms, in an outage)
// is put off (core.Unavailable), not charged.
//
// # Concurrency and order
//
// A Relay is safe for concurrent use: each dispatcher worker calls
// OnEvent and waits for its own confirm while the client pipelines the
// publishes of all workers on the shared connection; Config.MaxInFlight
// bounds how many await their confirm at once. Because OnEvent returns
// only after the confirm, ordered events (the outbox's per-key order)
// reach each queue in per-key order: the outbox hands a key's next event
// to a worker only after the previous one's outcome is written.
package rabbitmq
