package relay

import (
	"time"

	"github.com/outbox-go/outbox/core"
)

// The headers a relay adds to every message, beside the event's own
// headers (which carry, for example, the W3C trace context "traceparent"
// and "tracestate" under their own names). A header that would be empty
// (no aggregate, no tenant) is left out. The event id travels in the
// broker's own deduplication field as well (NATS "Nats-Msg-Id", encoded
// when NATS cannot carry it verbatim; AMQP message_id).
const (
	HeaderEventID       = "Outbox-Event-Id"
	HeaderEventType     = "Outbox-Event-Type"
	HeaderAggregateType = "Outbox-Aggregate-Type"
	HeaderAggregateID   = "Outbox-Aggregate-Id"
	HeaderTenant        = "Outbox-Tenant"
	HeaderOccurredAt    = "Outbox-Occurred-At" // RFC 3339 with nanoseconds, UTC
	HeaderOrderKey      = "Outbox-Order-Key"   // only for an ordered event
	HeaderContentType   = "Content-Type"       // "application/json" for a JSON payload
)

// Headers calls set for each header a relayed message of env carries: the
// Header* metadata first, then the event's own headers. An event header
// with the name of a metadata header is passed on after it, so a broker
// that keeps the last value of a name keeps the event's.
func Headers(env core.Envelope, set func(key, value string)) {
	set(HeaderEventID, env.ID())
	set(HeaderEventType, env.Type())
	if v := env.AggregateType(); v != "" {
		set(HeaderAggregateType, v)
	}
	if v := env.AggregateID(); v != "" {
		set(HeaderAggregateID, v)
	}
	if v := env.TenantID(); v != "" {
		set(HeaderTenant, v)
	}
	if t := env.OccurredAt(); !t.IsZero() {
		set(HeaderOccurredAt, t.UTC().Format(time.RFC3339Nano))
	}
	if v := env.OrderKey(); v != "" {
		set(HeaderOrderKey, v)
	}
	if env.IsJSON() {
		set(HeaderContentType, "application/json")
	}
	for k, v := range env.RawHeaders() {
		set(k, v)
	}
}
