package jdbcstore

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/core"
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
			got, err := SQLite.decodePayload(kind, v)
			if err == nil && got == nil {
				t.Fatalf("decodePayload(%d, %T) returned nil bytes without error", k, v)
			}
		}
	})
}

// FuzzDecodeRecord: whatever the columns hold, decoding a row never
// panics and a bad value only sets DecodeErr.
func FuzzDecodeRecord(f *testing.F) {
	f.Add("id", int64(0), []byte(`{}`), int64(1700000000000000), "", int64(0), false)
	f.Add("", int64(300), []byte{0xff}, int64(-1), `{"k":"v"}`, int64(-5), true)
	f.Fuzz(func(t *testing.T, id string, kind int64, payload []byte, micros int64, headers string, status int64, textTimes bool) {
		st := &Store{dialect: SQLite}
		var tm any = micros
		if textTimes {
			tm = fmt.Sprint(micros)
		}
		vals := []any{id, "T", nil, []byte("agg"), nil, tm, payload, kind, headers, status, int64(0), tm, tm, nil, nil, nil, nil}
		r := st.decodeRecord(vals)
		if textTimes && r.DecodeErr == nil {
			t.Fatal("text times decoded without error")
		}
		if !textTimes && (kind == 0 || kind == 1) && r.DecodeErr != nil {
			t.Fatalf("valid row: DecodeErr = %v", r.DecodeErr)
		}
		_, _ = r.Envelope() // must not panic either
	})
}

func TestSQLiteTimeCodec(t *testing.T) {
	t.Parallel()
	d := SQLite
	in := time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.FixedZone("X", -7*3600))
	got, err := d.decodeTime(d.encodeTime(in))
	if err != nil || !got.Equal(in.Truncate(time.Microsecond)) || got.Location() != time.UTC {
		t.Fatalf("round trip = %v, %v", got, err)
	}
	pre := time.Date(1969, 7, 20, 20, 17, 40, 500, time.UTC)
	if got, _ := d.decodeTime(d.encodeTime(pre)); !got.Equal(pre.Truncate(time.Microsecond)) {
		t.Errorf("pre-1970 round trip = %v, want %v", got, pre.Truncate(time.Microsecond))
	}
	if got, err := d.decodeTime(nil); err != nil || !got.IsZero() {
		t.Errorf("decodeTime(nil) = %v, %v", got, err)
	}
	for _, bad := range []any{"2024-01-01", 1.5, []byte{1}} {
		if _, err := d.decodeTime(bad); err == nil {
			t.Errorf("decodeTime(%#v) succeeded", bad)
		}
	}
}

func TestSQLiteClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want errClass
	}{
		{sqlite3.Error{Code: sqlite3.ErrBusy}, errBusy},
		{sqlite3.Error{Code: sqlite3.ErrBusy, ExtendedCode: sqlite3.ErrBusySnapshot}, errBusy},
		{sqlite3.Error{Code: sqlite3.ErrLocked, ExtendedCode: sqlite3.ErrLockedSharedCache}, errBusy},
		{&sqlite3.Error{Code: sqlite3.ErrBusy}, errBusy},
		{fmt.Errorf("wrapped: %w", sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintPrimaryKey}), errDuplicate},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintUnique}, errDuplicate},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintNotNull}, errOther},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintCheck}, errOther},
		{sqlite3.Error{Code: sqlite3.ErrCorrupt}, errOther},
		{fmt.Errorf("plain"), errOther},
		{nil, errOther},
	}
	for _, c := range cases {
		if got := SQLite.classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestSQLiteCapabilities(t *testing.T) {
	t.Parallel()
	if c := SQLite.caps(); !c.returning || c.skipLocked {
		t.Errorf("caps = %+v", c)
	}
	if SQLite.Name() != "sqlite" {
		t.Errorf("Name = %q", SQLite.Name())
	}
}
