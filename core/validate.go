package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Validate checks every rule of this package and returns the first
// violation as a *ValidationError. Envelopes from [Builder.Build] are
// already valid; Validate is cheap for them.
func (e Envelope) Validate() error {
	if e.validated {
		return nil
	}
	return validate(&e)
}

func validate(e *Envelope) error {
	if e.eventType == "" {
		return invalid("event_type", ErrEmptyEventType, "")
	}
	if err := checkText("event_id", e.id, MaxEventIDLen, ErrInvalidEventID); err != nil {
		return err
	}
	if e.id == "" {
		return invalid("event_id", ErrInvalidEventID, "empty")
	}
	if err := checkText("event_type", e.eventType, MaxEventTypeLen, ErrEventTypeTooLong); err != nil {
		return err
	}
	if err := checkText("aggregate_type", e.aggregateType, MaxAggregateTypeLen, ErrAggregateTypeTooLong); err != nil {
		return err
	}
	if err := checkText("aggregate_id", e.aggregateID, MaxAggregateIDLen, ErrAggregateIDTooLong); err != nil {
		return err
	}
	if err := checkText("tenant_id", e.tenantID, MaxTenantIDLen, ErrTenantIDTooLong); err != nil {
		return err
	}
	for k, v := range e.headers {
		if k == "" {
			return invalid("headers", ErrInvalidHeader, "empty key")
		}
		if !cleanText(k) || !cleanText(v) {
			return invalid("headers", ErrInvalidHeader, "key or value is not valid UTF-8 or contains NUL")
		}
	}
	if len(e.payload) > MaxPayloadBytes {
		return invalid("payload", ErrPayloadTooLarge, fmt.Sprintf("%d bytes, limit %d", len(e.payload), MaxPayloadBytes))
	}
	switch e.kind {
	case PayloadJSON:
		// json.Valid accepts invalid UTF-8 inside strings; databases do
		// not (MySQL rejects it at insert), so no database may see it.
		if !utf8.Valid(e.payload) {
			return invalid("payload", ErrInvalidJSON, "not UTF-8")
		}
		if !json.Valid(e.payload) {
			return invalid("payload", ErrInvalidJSON, "")
		}
	case PayloadBytes:
		// Any bytes, including none: a stored empty payload may read back as nil.
	default:
		return invalid("payload", ErrNoPayload, "unknown payload kind")
	}
	return nil
}

// checkText enforces valid UTF-8 without NUL and a maximum rune count.
func checkText(field, s string, max int, tooLong error) error {
	if !cleanText(s) {
		return invalid(field, ErrInvalidText, "")
	}
	if n := len(s); n > max && utf8.RuneCountInString(s) > max {
		return invalid(field, tooLong, fmt.Sprintf("%d characters, limit %d", utf8.RuneCountInString(s), max))
	}
	return nil
}

func cleanText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
