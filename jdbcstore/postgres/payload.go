package postgres

import (
	"fmt"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/jsoncol"
)

// encodePayload returns the text stored in the jsonb payload column: the
// document itself for a JSON payload, a JSON string holding the standard
// base64 of the bytes for a bytes payload. It returns a string, which pgx
// sends to a jsonb parameter as is.
func encodePayload(kind core.PayloadKind, p []byte) (string, error) {
	if kind == core.PayloadJSON && utf8.Valid(p) {
		if err := jsonbStores(p); err != nil {
			return "", err
		}
	}
	return jsoncol.Encode(kind, p)
}

// jsonbStores refuses, before the INSERT, the valid JSON that jsonb
// cannot store or would store too large: the server refuses the first
// (and a statement it refuses aborts the caller's transaction), and the
// second turns a small payload into one every claim reads back in full
// (jsonb keeps every digit of 1e131071: 131,072 bytes from 8).
func jsonbStores(p []byte) error {
	f := jsoncol.Inspect(p)
	switch {
	case f.NUL || f.LoneSurrogate:
		return fmt.Errorf(`%w: it holds \u0000 or a lone UTF-16 surrogate, which PostgreSQL's jsonb cannot store`, core.ErrInvalidJSON)
	case f.NumericOverflow:
		return fmt.Errorf("%w: it holds a number PostgreSQL's jsonb cannot store: more than %d digits before the decimal point or %d after it when written out in full",
			core.ErrInvalidJSON, jsoncol.MaxNumericIntDigits, jsoncol.MaxNumericScale)
	case int64(len(p))+f.NumericGrowth > core.MaxPayloadBytes:
		return fmt.Errorf("%w: its numbers written out in full, as PostgreSQL's jsonb keeps them (1e1000 is 1,001 digits), make it %d bytes, over the %d-byte payload limit",
			core.ErrInvalidJSON, int64(len(p))+f.NumericGrowth, core.MaxPayloadBytes)
	}
	return nil
}
