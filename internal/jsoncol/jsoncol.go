// Package jsoncol is the payload codec of the dialects that keep payloads
// in a JSON column (MySQL/MariaDB JSON, PostgreSQL jsonb): a JSON payload
// is stored as the document itself, a bytes payload as a JSON string
// holding its standard base64, byte-exact on the way back.
package jsoncol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
)

// Encode returns the text to store for a payload of kind. It returns a
// string, not []byte: MySQL 8 refuses to read JSON from a binary-charset
// value, and pgx sends a string to a jsonb parameter as is. A JSON payload
// must be valid UTF-8.
func Encode(kind core.PayloadKind, p []byte) (string, error) {
	switch kind {
	case core.PayloadJSON:
		if !utf8.Valid(p) {
			return "", errors.New("JSON payload is not valid UTF-8")
		}
		return string(p), nil
	case core.PayloadBytes:
		b := make([]byte, 0, base64.StdEncoding.EncodedLen(len(p))+2)
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, p)
		b = append(b, '"')
		return string(b), nil
	}
	return "", fmt.Errorf("unknown payload kind %d", uint8(kind))
}

// Decode is the inverse of Encode, for a value scanned as []byte or string
// (anything else, NULL included, is an error). A bytes payload must be a
// JSON string of strict standard base64. It never panics and never returns
// nil bytes without an error.
func Decode(kind core.PayloadKind, v any) ([]byte, error) {
	var stored []byte
	switch v := v.(type) {
	case []byte:
		stored = v
	case string:
		stored = []byte(v)
	case nil:
		return nil, errors.New("stored payload is NULL")
	default:
		return nil, fmt.Errorf("stored payload is %T, want JSON text", v)
	}
	switch kind {
	case core.PayloadJSON:
		if len(stored) == 0 {
			return nil, errors.New("stored JSON payload is empty")
		}
		return stored, nil
	case core.PayloadBytes:
		s := bytes.TrimSpace(stored)
		var b64 []byte
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' && !bytes.ContainsAny(s[1:len(s)-1], `\"`) {
			b64 = s[1 : len(s)-1] // the form Encode writes
		} else {
			// A JSON string with escapes (e.g. "\/"), written by another
			// tool; anything but a JSON string fails here.
			var str string
			if err := json.Unmarshal(s, &str); err != nil {
				return nil, fmt.Errorf("stored bytes payload is not a JSON string of base64: %w", err)
			}
			b64 = []byte(str)
		}
		out := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
		n, err := base64.StdEncoding.Strict().Decode(out, b64)
		if err != nil {
			return nil, fmt.Errorf("stored bytes payload is not standard base64: %w", err)
		}
		return out[:n], nil
	}
	return nil, fmt.Errorf("unknown payload kind %d", uint8(kind))
}
