package sqlite

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// FuzzSQLitePayloadCodec: known kinds round-trip byte-exact; anything else
// is an error, never a panic, through the pure pair and the dialect's
// decoder of scanned values.
func FuzzSQLitePayloadCodec(f *testing.F) {
	f.Add(uint8(0), []byte(`{"a":1}`))
	f.Add(uint8(1), []byte{0, 1, 2, 0xff})
	f.Add(uint8(1), []byte{})
	f.Add(uint8(7), []byte("x"))
	f.Add(uint8(255), []byte(nil))
	f.Fuzz(func(t *testing.T, k uint8, p []byte) {
		kind := core.PayloadKind(k)
		known := kind == core.PayloadJSON || kind == core.PayloadBytes
		enc, err := sqliteEncodePayload(kind, p)
		if known != (err == nil) {
			t.Fatalf("encode kind %d: err = %v", k, err)
		}
		if known {
			if enc == nil {
				t.Fatal("encode returned nil bytes (the driver would bind NULL)")
			}
			dec, err := sqliteDecodePayload(kind, enc)
			if err != nil || !bytes.Equal(dec, p) {
				t.Fatalf("round trip: %x, %v; want %x", dec, err, p)
			}
		}
		if _, err := sqliteDecodePayload(kind, p); known != (err == nil) {
			t.Fatalf("decode kind %d: err = %v", k, err)
		}
		for _, v := range []any{p, string(p), nil, int64(len(p)), float64(k), time.Unix(int64(k), 0)} {
			got, err := Dialect.DecodePayload(kind, v)
			if err == nil && got == nil {
				t.Fatalf("decodePayload(%d, %T) returned nil bytes without error", k, v)
			}
		}
	})
}

func TestSQLiteTimeCodec(t *testing.T) {
	t.Parallel()
	d := Dialect
	in := time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.FixedZone("X", -7*3600))
	got, err := d.DecodeTime(d.EncodeTime(in))
	if err != nil || !got.Equal(in.Truncate(time.Microsecond)) || got.Location() != time.UTC {
		t.Fatalf("round trip = %v, %v", got, err)
	}
	pre := time.Date(1969, 7, 20, 20, 17, 40, 500, time.UTC)
	if got, _ := d.DecodeTime(d.EncodeTime(pre)); !got.Equal(pre.Truncate(time.Microsecond)) {
		t.Errorf("pre-1970 round trip = %v, want %v", got, pre.Truncate(time.Microsecond))
	}
	if got, err := d.DecodeTime(nil); err != nil || !got.IsZero() {
		t.Errorf("decodeTime(nil) = %v, %v", got, err)
	}
	for _, bad := range []any{"2024-01-01", 1.5, []byte{1}} {
		if _, err := d.DecodeTime(bad); err == nil {
			t.Errorf("decodeTime(%#v) succeeded", bad)
		}
	}
}

func TestSQLiteClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want jdbcstore.ErrorClass
	}{
		{sqlite3.Error{Code: sqlite3.ErrBusy}, jdbcstore.ClassBusy},
		{sqlite3.Error{Code: sqlite3.ErrBusy, ExtendedCode: sqlite3.ErrBusySnapshot}, jdbcstore.ClassBusy},
		{sqlite3.Error{Code: sqlite3.ErrLocked, ExtendedCode: sqlite3.ErrLockedSharedCache}, jdbcstore.ClassBusy},
		{&sqlite3.Error{Code: sqlite3.ErrBusy}, jdbcstore.ClassBusy},
		{fmt.Errorf("wrapped: %w", sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintPrimaryKey}), jdbcstore.ClassDuplicate},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintUnique}, jdbcstore.ClassDuplicate},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintNotNull}, jdbcstore.ClassOther},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintCheck}, jdbcstore.ClassOther},
		{sqlite3.Error{Code: sqlite3.ErrCorrupt}, jdbcstore.ClassOther},
		{fmt.Errorf("plain"), jdbcstore.ClassOther},
		{nil, jdbcstore.ClassOther},
	}
	for _, c := range cases {
		if got := Dialect.Classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestSQLiteCapabilities(t *testing.T) {
	t.Parallel()
	if c := Dialect.Capabilities(); !c.Returning || c.SkipLocked || !c.SingleWriter {
		t.Errorf("caps = %+v", c)
	}
	if Dialect.Name() != "sqlite" {
		t.Errorf("Name = %q", Dialect.Name())
	}
}
