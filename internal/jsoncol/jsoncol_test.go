package jsoncol

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
)

// FuzzCodec: known kinds round-trip byte-exact (JSON text must
// be UTF-8); whatever the column holds,
// decoding never panics, and it returns bytes or an error, never nil
// without an error.
func FuzzCodec(f *testing.F) {
	f.Add(uint8(0), []byte(`{"a":1}`))
	f.Add(uint8(1), []byte{0, 1, 2, 0xff})
	f.Add(uint8(1), []byte{})
	f.Add(uint8(1), []byte(`"AAEC/w=="`))
	f.Add(uint8(1), []byte(`"AAEC\/w=="`))
	f.Add(uint8(1), []byte(`"AAE"`))
	f.Add(uint8(1), []byte(` "" `))
	f.Add(uint8(1), []byte(`"\u0041AAA"`))
	f.Add(uint8(0), []byte("\xff"))
	f.Add(uint8(7), []byte("x"))
	f.Add(uint8(255), []byte(nil))
	f.Fuzz(func(t *testing.T, k uint8, p []byte) {
		kind := core.PayloadKind(k)
		enc, err := Encode(kind, p)
		switch kind {
		case core.PayloadJSON:
			if utf8.Valid(p) != (err == nil) {
				t.Fatalf("encode JSON %q: err = %v", p, err)
			}
			if err == nil && len(p) > 0 {
				dec, err := Decode(kind, enc)
				if err != nil || !bytes.Equal(dec, p) {
					t.Fatalf("JSON round trip: %q, %v; want %q", dec, err, p)
				}
			}
		case core.PayloadBytes:
			if err != nil {
				t.Fatalf("encode bytes: %v", err)
			}
			want := `"` + base64.StdEncoding.EncodeToString(p) + `"`
			if enc != want {
				t.Fatalf("encoded %q, want %q", enc, want)
			}
			dec, err := Decode(kind, enc)
			if err != nil || dec == nil || !bytes.Equal(dec, p) {
				t.Fatalf("bytes round trip: %x, %v; want %x", dec, err, p)
			}
		default:
			if err == nil {
				t.Fatalf("encode kind %d succeeded", k)
			}
			if _, err := Decode(kind, p); err == nil {
				t.Fatalf("decode kind %d succeeded", k)
			}
		}
		// Anything stored: decoding must not panic, and a success gives
		// bytes that encode to a value decoding to the same bytes.
		if dec, err := Decode(kind, p); err == nil {
			if dec == nil {
				t.Fatal("decode returned nil bytes without error")
			}
			if kind == core.PayloadBytes {
				again, _ := Encode(kind, dec)
				if d2, err := Decode(kind, again); err != nil || !bytes.Equal(d2, dec) {
					t.Fatalf("re-encoded payload does not decode back: %v", err)
				}
			}
		}
		for _, v := range []any{p, string(p), nil, int64(len(p)), float64(k), time.Unix(int64(k), 0)} {
			got, err := Decode(kind, v)
			if err == nil && got == nil {
				t.Fatalf("Decode(%d, %T) returned nil bytes without error", k, v)
			}
		}
	})
}
