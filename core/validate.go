package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Validate checks every rule of this package and returns the first
// violation as a *ValidationError. Envelopes from [Builder.Build] are
// already valid; Validate is cheap for them. An envelope read back from a
// store ([Record.Envelope]) that breaks a limit added after it was stored
// (MaxHeaderKeyLen, MaxHeadersBytes, the years of its times), or whose
// JSON payload the database gave back longer than MaxPayloadBytes, is
// delivered, but fails Validate, so it cannot be published again as it is.
func (e Envelope) Validate() error {
	if e.validated {
		return nil
	}
	if err := validate(&e, true); err != nil {
		return err
	}
	return checkLimits(&e)
}

// checkPayloadSize enforces MaxPayloadBytes on what is published. An event
// read back may exceed it: a database that rewrites JSON (PostgreSQL's
// jsonb, MySQL 8: ", " and ": ") gives back a longer document than it was
// given.
func checkPayloadSize(e *Envelope) error {
	if len(e.payload) > MaxPayloadBytes {
		return invalid("payload", ErrPayloadTooLarge, fmt.Sprintf("%d bytes, limit %d", len(e.payload), MaxPayloadBytes))
	}
	return nil
}

// validate checks the rules an envelope read back from a store must meet
// as well, and with published the payload's size (checkPayloadSize, before
// the payload is read); checkLimits the ones only a new envelope must.
func validate(e *Envelope, published bool) error {
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
	if published {
		if err := checkPayloadSize(e); err != nil {
			return err
		}
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

// Bounds of OccurredAt and NotBefore (see MinTimeYear, MaxTimeYear).
var (
	minTime = time.Date(MinTimeYear, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(MaxTimeYear+1, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Microsecond)
)

// wildcardType is the type that stands for every type: in listener
// registries (registry.Wildcard) and in Ordering.Types. No event has it.
const wildcardType = "*"

// checkLimits checks the limits added after events were first stored: the
// header key length, the size of the headers, the range of the times
// and the wildcard "*" as a type.
// Build and Validate check them (and checkPayloadSize); Record.Envelope
// does not, so such an event stays deliverable (its envelope, unmarked as
// validated, fails Validate and cannot be published again as it is).
func checkLimits(e *Envelope) error {
	if e.eventType == wildcardType {
		return invalid("event_type", ErrWildcardEventType, "")
	}
	for k := range e.headers {
		if err := checkHeaderKey(k); err != nil {
			return err
		}
	}
	if err := checkHeadersSize(e.headers); err != nil {
		return err
	}
	if err := checkTime("occurred_at", e.occurredAt); err != nil {
		return err
	}
	return checkTime("not_before", e.notBefore)
}

// checkHeaderKey enforces MaxHeaderKeyLen.
func checkHeaderKey(k string) error {
	if len(k) > MaxHeaderKeyLen {
		if n := utf8.RuneCountInString(k); n > MaxHeaderKeyLen {
			return invalid("headers", ErrHeaderKeyTooLong, fmt.Sprintf("a key of %d characters, limit %d", n, MaxHeaderKeyLen))
		}
	}
	return nil
}

// checkHeadersSize enforces MaxHeadersBytes on the JSON encoding of h,
// without encoding it when the sizes of its keys and values decide.
func checkHeadersSize(h map[string]string) error {
	if len(h) == 0 {
		return nil
	}
	// {"k":"v","k":"v"}: 6 bytes per entry besides its escaped key and
	// value, less one comma, plus the braces. An escape takes at most 6
	// bytes (\u003c) for one byte of the text.
	least := 1 + 6*len(h)
	for k, v := range h {
		least += len(k) + len(v)
	}
	most := least + 5*(least-1-6*len(h))
	if least > MaxHeadersBytes {
		return tooLargeHeaders(least, true)
	}
	if most <= MaxHeadersBytes {
		return nil
	}
	s, err := EncodeHeaders(h)
	if err != nil {
		return invalid("headers", ErrInvalidHeader, "cannot encode")
	}
	if len(s) > MaxHeadersBytes {
		return tooLargeHeaders(len(s), false)
	}
	return nil
}

func tooLargeHeaders(n int, atLeast bool) error {
	if atLeast {
		return invalid("headers", ErrHeadersTooLarge, fmt.Sprintf("at least %d bytes as JSON, limit %d", n, MaxHeadersBytes))
	}
	return invalid("headers", ErrHeadersTooLarge, fmt.Sprintf("%d bytes as JSON, limit %d", n, MaxHeadersBytes))
}

// checkTime enforces the years MinTimeYear..MaxTimeYear in UTC. The zero
// time (in year 1) passes: for NotBefore it means no delay.
func checkTime(field string, t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return invalid(field, ErrTimeOutOfRange, fmt.Sprintf("year %d in UTC, must be %d to %d", t.UTC().Year(), MinTimeYear, MaxTimeYear))
	}
	return nil
}

// CheckEventType reports whether an event of type t could be built: nil
// for a type of 1..MaxEventTypeLen characters of valid UTF-8 without NUL
// other than the wildcard "*", else a *ValidationError matching
// ErrEmptyEventType, ErrEventTypeTooLong, ErrInvalidText or
// ErrWildcardEventType. Listener registries use it: a listener registered
// for a type no event can have would never run.
func CheckEventType(t string) error {
	switch t {
	case "":
		return invalid("event_type", ErrEmptyEventType, "")
	case wildcardType:
		return invalid("event_type", ErrWildcardEventType, "")
	}
	return checkText("event_type", t, MaxEventTypeLen, ErrEventTypeTooLong)
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
