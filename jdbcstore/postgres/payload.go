package postgres

import (
	"errors"
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
		if err := jsonbEscapes(p); err != nil {
			return "", err
		}
	}
	return jsoncol.Encode(kind, p)
}

// errJSONBEscape is the error of a JSON payload jsonb cannot store.
var errJSONBEscape = errors.New(`JSON payload holds \u0000 or a lone UTF-16 surrogate, which PostgreSQL's jsonb cannot store`)

// jsonbEscapes rejects the \u escapes jsonb refuses: \u0000 (text cannot
// hold NUL) and a surrogate that is not a high one followed by a low one.
// Checking before the INSERT keeps the caller's transaction usable: a
// statement the server refuses aborts it.
func jsonbEscapes(p []byte) error {
	for i := 0; i < len(p); i++ {
		if p[i] != '\\' {
			continue
		}
		if i+1 >= len(p) || p[i+1] != 'u' {
			i++ // skip the escaped character (\\, \", ...)
			continue
		}
		r, ok := hex4(p, i+2)
		if !ok {
			i++
			continue // not valid JSON; the server reports it
		}
		switch {
		case r == 0:
			return errJSONBEscape
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := -1, false
			if i+7 < len(p) && p[i+6] == '\\' && p[i+7] == 'u' {
				lo, ok = hex4(p, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return errJSONBEscape
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return errJSONBEscape
		default:
			i += 5
		}
	}
	return nil
}

// hex4 parses the four hex digits at p[i:].
func hex4(p []byte, i int) (int, bool) {
	if i+4 > len(p) {
		return 0, false
	}
	n := 0
	for _, c := range p[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}
