package core

import (
	"bytes"
	"encoding/json"
	"maps"
	"time"
)

// Limits enforced by validation. Lengths are counted in characters (runes),
// as SQL VARCHAR columns count them; the payload and headers limits are in
// bytes.
const (
	MaxEventIDLen       = 36
	MaxEventTypeLen     = 128
	MaxAggregateTypeLen = 64
	MaxAggregateIDLen   = 128
	MaxTenantIDLen      = 64
	MaxPayloadBytes     = 1 << 20 // 1,048,576
	// MaxHeaderKeyLen is the longest header key, in characters.
	MaxHeaderKeyLen = 128
	// MaxHeadersBytes bounds the headers of an event: their JSON encoding
	// as the outbox stores it ({"key":"value",...}, with json.Marshal's
	// escapes) is at most this many bytes. It leaves room for the payload
	// in MySQL's and MariaDB's smallest max_allowed_packet.
	MaxHeadersBytes = 64 << 10 // 65,536
	// MinTimeYear and MaxTimeYear bound OccurredAt and NotBefore: both
	// must fall within these years (UTC), which every supported database
	// stores as given (MySQL's DATETIME ends with 9999; SQLite's integer
	// microseconds and PostgreSQL's timestamptz end later).
	MinTimeYear = 1
	MaxTimeYear = 9999
	// MaxOwnerLen is the longest lease owner token, in bytes.
	MaxOwnerLen = 64
)

// Envelope is an immutable event: identity, type, routing metadata and a
// payload that is serialized once and reused for the insert and the dispatch.
//
// Build one with [NewEvent], [NewEventOf] or [JSONEvent]. Accessors return
// copies of the headers and payload, so a listener cannot change what other
// listeners see. The zero Envelope is invalid.
type Envelope struct {
	id            string
	eventType     string
	occurredAt    time.Time
	aggregateType string
	aggregateID   string
	tenantID      string
	headers       map[string]string
	payload       []byte
	kind          PayloadKind
	notBefore     time.Time // zero: deliver at once
	orderKey      string    // "": unordered
	onDead        DeadPolicy
	onDeadSet     bool // the builder's OnDead was called: Ordering.Apply keeps onDead
	validated     bool
}

// ID returns the event id (a monotonic ULID unless set explicitly).
func (e Envelope) ID() string { return e.id }

// Type returns the event type name.
func (e Envelope) Type() string { return e.eventType }

// OccurredAt returns when the event happened (UTC).
func (e Envelope) OccurredAt() time.Time { return e.occurredAt }

// AggregateType returns the aggregate type name, or "".
func (e Envelope) AggregateType() string { return e.aggregateType }

// AggregateID returns the aggregate id, or "".
func (e Envelope) AggregateID() string { return e.aggregateID }

// TenantID returns the tenant id, or "". The framework stores and passes it
// through; it does not filter or isolate by tenant.
func (e Envelope) TenantID() string { return e.tenantID }

// Headers returns a copy of the headers (never nil).
func (e Envelope) Headers() map[string]string {
	if len(e.headers) == 0 {
		return map[string]string{}
	}
	return maps.Clone(e.headers)
}

// Header returns one header value.
func (e Envelope) Header(key string) (string, bool) {
	v, ok := e.headers[key]
	return v, ok
}

// NotBefore returns the earliest time the event may be handed to a
// listener, as [Builder.NotBefore] set it (or Build computed it from a
// Delay): the zero time when none was set; a time in the past, kept as
// given, also means at once. Envelopes
// read back from the store report the zero time: their due time is the
// row's available_at.
func (e Envelope) NotBefore() time.Time { return e.notBefore }

// PayloadKind tells whether the payload is JSON or opaque bytes.
func (e Envelope) PayloadKind() PayloadKind { return e.kind }

// IsJSON reports whether the payload is a JSON document.
func (e Envelope) IsJSON() bool { return e.kind == PayloadJSON }

// Payload returns a copy of the payload bytes, whichever the kind.
func (e Envelope) Payload() []byte { return bytes.Clone(e.payload) }

// PayloadString returns the payload as a string (for JSON payloads, the document).
func (e Envelope) PayloadString() string { return string(e.payload) }

// PayloadLen returns the payload size in bytes.
func (e Envelope) PayloadLen() int { return len(e.payload) }

// Decode unmarshals a JSON payload into v without copying it first.
func (e Envelope) Decode(v any) error {
	if e.kind != PayloadJSON {
		return invalid("payload", ErrInvalidJSON, "payload is bytes, not JSON")
	}
	return json.Unmarshal(e.payload, v)
}

// RawPayload returns the payload without copying. The caller must not modify
// it; stores and codecs use it to avoid a copy of up to 1 MiB per event.
func (e Envelope) RawPayload() []byte { return e.payload }

// RawHeaders returns the headers map without copying. The caller must not
// modify it.
func (e Envelope) RawHeaders() map[string]string { return e.headers }
