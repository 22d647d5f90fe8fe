package core

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Record is a stored event row as a [Store] reads it back, before it is
// turned into an [Envelope]. Stores fill it; the poller calls
// [Record.Envelope] and marks rows that fail to decode DEAD.
type Record struct {
	ID            string
	Type          string
	OccurredAt    time.Time
	AggregateType string
	AggregateID   string
	TenantID      string
	HeadersJSON   string // JSON object of string values, or "" for none
	Payload       []byte
	PayloadKind   PayloadKind
	Status        Status
	Attempts      int
	AvailableAt   time.Time
	CreatedAt     time.Time
	DoneAt        time.Time // when it finished (DONE or DEAD); zero while pending
	LastError     string
	LockedBy      string    // owner token of the lease holder, or ""
	LockedUntil   time.Time // end of the lease, or zero
	// OrderKey is the key of an ordered event, "" for an unordered one;
	// OrderSeq its position among the events of the key (1, 2, ...,
	// without gaps) and OnDead its policy should it go DEAD.
	OrderKey string
	OrderSeq int64
	OnDead   DeadPolicy
	// DecodeErr is set by a store that could not decode a column (for
	// example a bytes payload whose stored encoding is corrupt).
	DecodeErr error
}

// Envelope rebuilds and validates the envelope of r. Failures wrap ErrDecode
// (and, for invalid fields, the validation sentinel). The envelope takes
// r.Payload as its payload without copying it (a store hands over the
// bytes it read): do not modify r.Payload afterwards, or copy it first.
func (r Record) Envelope() (Envelope, error) {
	if r.DecodeErr != nil {
		return Envelope{}, fmt.Errorf("%w: event %q: %w", ErrDecode, r.ID, r.DecodeErr)
	}
	headers, err := DecodeHeaders(r.HeadersJSON)
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: event %q: %w", ErrDecode, r.ID, err)
	}
	env := Envelope{
		id:            r.ID,
		eventType:     r.Type,
		occurredAt:    r.OccurredAt.UTC(),
		aggregateType: r.AggregateType,
		aggregateID:   r.AggregateID,
		tenantID:      r.TenantID,
		headers:       headers,
		payload:       r.Payload,
		kind:          r.PayloadKind,
		orderKey:      r.OrderKey,
		onDead:        r.OnDead,
	}
	if err := validate(&env, false); err != nil {
		return Envelope{}, fmt.Errorf("%w: event %q: %w", ErrDecode, r.ID, err)
	}
	if env.orderKey != "" {
		if err := checkOrder(env.orderKey, env.onDead); err != nil {
			return Envelope{}, fmt.Errorf("%w: event %q: %w", ErrDecode, r.ID, err)
		}
	}
	// An event stored before the limits of checkLimits, or whose payload
	// the database gave back longer than MaxPayloadBytes, is delivered all
	// the same; only Validate (a publish of it) refuses it.
	env.validated = checkPayloadSize(&env) == nil && checkLimits(&env) == nil
	return env, nil
}

// EncodeHeaders renders headers as a JSON object, or "" when there are none.
func EncodeHeaders(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	if s, ok := encodePlainHeaders(h); ok {
		return s, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("outbox: encode headers: %w", err)
	}
	return string(b), nil
}

// maxPlainHeaders bounds the headers encodePlainHeaders renders.
const maxPlainHeaders = 8

// encodePlainHeaders renders a few headers (a trace context, typically)
// byte for byte as json.Marshal does, without its reflection, when no key
// or value needs escaping; ok is false otherwise.
func encodePlainHeaders(h map[string]string) (s string, ok bool) {
	if len(h) > maxPlainHeaders {
		return "", false
	}
	var buf [maxPlainHeaders]string
	keys := buf[:0]
	size := 2 // {}
	for k, v := range h {
		if !plainJSON(k) || !plainJSON(v) {
			return "", false
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 6 // "k":"v",
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(k)
		b.WriteString(`":"`)
		b.WriteString(h[k])
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String(), true
}

// plainJSON reports whether json.Marshal writes s between quotes as it is:
// printable ASCII without the quote, the backslash and the characters it
// escapes for HTML (<, >, &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// DecodeHeaders parses what EncodeHeaders produced. "" and "null" decode to
// nil. Anything other than a JSON object of strings (a null value reads as
// "") is an error; it never panics.
func DecodeHeaders(s string) (map[string]string, error) {
	if s == "" || s == "null" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, fmt.Errorf("malformed headers: %w", err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	return h, nil
}
