package relay

import (
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
)

// The headers a relay adds to every message, beside the event's own
// headers (which carry, for example, the W3C trace context "traceparent"
// and "tracestate" under their own names). These names are the relay's:
// an event header named like one of them is dropped (see [Headers]), so
// each carries the event's own field. A header that would be empty
// (no aggregate, no tenant) is left out. The event id travels in the
// broker's own deduplication field as well (NATS "Nats-Msg-Id", encoded
// when NATS cannot carry it verbatim; AMQP message_id).
const (
	HeaderEventID       = "Outbox-Event-Id"
	HeaderEventType     = "Outbox-Event-Type"
	HeaderAggregateType = "Outbox-Aggregate-Type"
	HeaderAggregateID   = "Outbox-Aggregate-Id"
	HeaderTenant        = "Outbox-Tenant"
	HeaderOccurredAt    = "Outbox-Occurred-At" // RFC 3339 in UTC, as time.RFC3339Nano writes it: microseconds at most, trailing zeros of the fraction left out
	HeaderOrderKey      = "Outbox-Order-Key"   // only for an ordered event
	HeaderContentType   = "Content-Type"       // "application/json" for a JSON payload
)

// Headers calls set for each header a relayed message of env carries: the
// event's own headers first, then the Header* metadata, so a broker that
// keeps the last value of a name keeps the metadata. The metadata is the
// relay's: an event header whose name is one of the Outbox-* metadata
// names, in any case, is dropped (silently, like JetStream's "Nats-"
// headers on NATS), whether or not env has the field (no tenant, no
// order key), so a consumer that reads Outbox-Event-Id or Outbox-Tenant
// reads env's own, never a value copied into its headers. Content-Type
// is the relay's only for a JSON payload: an event header of that name
// (in any case) is dropped then, and travels as it is with a bytes
// payload.
func Headers(env core.Envelope, set func(key, value string)) {
	isJSON := env.IsJSON()
	for k, v := range env.RawHeaders() {
		if IsMetadataHeader(k) && (isJSON || !strings.EqualFold(k, HeaderContentType)) {
			continue
		}
		set(k, v)
	}
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
	if isJSON {
		set(HeaderContentType, "application/json")
	}
}

// metadataHeaders are the names of the Header* constants.
var metadataHeaders = [...]string{
	HeaderEventID, HeaderEventType, HeaderAggregateType, HeaderAggregateID,
	HeaderTenant, HeaderOccurredAt, HeaderOrderKey, HeaderContentType,
}

// IsMetadataHeader reports whether name is, in any case, the name of one
// of the Header* metadata headers. The relays drop a header of such a
// name that a Propagator writes after the metadata, as [Headers] drops
// the event's.
func IsMetadataHeader(name string) bool {
	for _, m := range metadataHeaders {
		if len(name) == len(m) && strings.EqualFold(name, m) {
			return true
		}
	}
	return false
}

// DeleteOtherCases deletes from m every entry whose key equals key
// without regard to case but is spelled otherwise (Traceparent for
// traceparent): a relay's Propagator replaces the event's header of the
// same name in any case, where both went out and a consumer reading names
// without case could take the event's trace context for the relay's.
func DeleteOtherCases[V any](m map[string]V, key string) {
	for k := range m {
		if k != key && strings.EqualFold(k, key) {
			delete(m, k)
		}
	}
}
