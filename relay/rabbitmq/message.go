package rabbitmq

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay"
)

// The headers RabbitMQ routes a message by besides its routing key
// (sender-selected distribution), matched in this case only. Their value
// must be an array of routing keys: the broker closes the channel of a
// message where one is a string (406 PRECONDITION_FAILED,
// unacceptable_type_in_header). The relay refuses an event header (or a
// Propagator's) of either name rather than send it as an array: an event
// field must not add destinations to its message.
const (
	headerCC  = "CC"
	headerBCC = "BCC"
)

// message builds the AMQP message of env, after checking that every short
// string it needs fits AMQP's 255 bytes; propagator, when not nil, writes
// the trace context of ctx last.
func message(ctx context.Context, env core.Envelope, exchange, key string, propagator core.HeaderInjector) (amqp.Publishing, error) {
	for _, f := range []struct{ what, v string }{
		{"exchange", exchange}, {"routing key", key}, {"event id (message_id)", env.ID()}, {"event type (type)", env.Type()},
	} {
		if err := checkShortString(f.what, f.v); err != nil {
			return amqp.Publishing{}, fmt.Errorf("%w: event %s: %v", ErrInvalidMessage, env.ID(), err)
		}
	}
	headers := amqp.Table{}
	var bad error
	set := func(k, v string) {
		switch {
		case bad != nil:
		case len(k) > maxShortString:
			bad = fmt.Errorf("%w: event %s: a header name is %d bytes, AMQP allows %d", ErrInvalidMessage, env.ID(), len(k), maxShortString)
		case k == headerCC || k == headerBCC:
			bad = fmt.Errorf("%w: event %s: header %q is RabbitMQ's sender-selected distribution header (%s and %s, in this case: "+
				"an array of further routing keys for the message); a string there makes the broker refuse the message: rename the header",
				ErrInvalidMessage, env.ID(), k, headerCC, headerBCC)
		}
		headers[k] = v
	}
	relay.Headers(env, set)
	if propagator != nil {
		// After the metadata, which it must not replace. It replaces the
		// event's header of the same name in any case (Traceparent for
		// traceparent): both went out, and a consumer reading names
		// without case could take the publisher's trace context.
		propagator.InjectHeaders(ctx, func(k, v string) {
			if relay.IsMetadataHeader(k) {
				return
			}
			relay.DeleteOtherCases(headers, k)
			set(k, v)
		})
	}
	if bad != nil {
		return amqp.Publishing{}, bad
	}
	msg := amqp.Publishing{
		Headers:      headers,
		DeliveryMode: amqp.Persistent,
		MessageId:    env.ID(),
		Timestamp:    env.OccurredAt(),
		Type:         env.Type(),
		Body:         env.RawPayload(),
	}
	if env.IsJSON() {
		msg.ContentType = "application/json"
	}
	return msg, nil
}
