package postgres

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/jsoncol"
	"github.com/outbox-go/outbox/jdbcstore"
)

// FuzzPostgresPayloadCodec: the dialect encodes like internal/jsoncol
// (fuzzed there) except that it refuses the JSON jsonb cannot hold or
// would blow up (core.ErrInvalidJSON); what it encodes decodes back
// byte-exact.
func FuzzPostgresPayloadCodec(f *testing.F) {
	f.Add(uint8(0), []byte(`{"a":1}`))
	f.Add(uint8(0), []byte(`{"a":"\u0000"}`))
	f.Add(uint8(0), []byte(`["\ud83d\ude00", "\\u0000"]`))
	f.Add(uint8(0), []byte(`"\udc00"`))
	f.Add(uint8(1), []byte{0, 1, 2, 0xff})
	f.Add(uint8(0), []byte("\xff"))
	f.Add(uint8(7), []byte("x"))
	f.Add(uint8(0), []byte(`[1e131071,-0.5e-3,"1e999"]`))
	f.Fuzz(func(t *testing.T, k uint8, p []byte) {
		kind := core.PayloadKind(k)
		enc, err := encodePayload(kind, p)
		want, wantErr := jsoncol.Encode(kind, p)
		switch {
		case errors.Is(err, core.ErrInvalidJSON):
			if kind != core.PayloadJSON || wantErr != nil {
				t.Fatalf("jsonb refusal for kind %d, %q (jsoncol: %v)", k, p, wantErr)
			}
			return
		case (err == nil) != (wantErr == nil) || enc != want:
			t.Fatalf("encodePayload(%d, %q) = %q, %v; jsoncol says %q, %v", k, p, enc, err, want, wantErr)
		case err != nil || len(p) == 0 && kind == core.PayloadJSON:
			return
		}
		dec, err := Dialect.DecodePayload(kind, enc)
		if err != nil || !bytes.Equal(dec, p) {
			t.Fatalf("round trip of %q: %q, %v", p, dec, err)
		}
	})
}

// jsonb refuses \u0000 and lone surrogates: the dialect refuses them first
// (so the caller's transaction is not aborted) and accepts every other
// escape, including escaped backslashes before a "u".
func TestPostgresJSONBEscapes(t *testing.T) {
	t.Parallel()
	for doc, ok := range map[string]bool{
		`{"a":"\u0000"}`:          false,
		`{"a":"x\U0000"}`:         true, // \U is not an escape; the server rejects the JSON
		`{"a":"\ud800"}`:          false,
		`{"a":"\udc00"}`:          false,
		`{"a":"\ud800\u0041"}`:    false,
		`{"a":"\ud83d\ude00"}`:    true,
		`{"a":"\\u0000"}`:         true,
		`{"a":"\\\u0000"}`:        false,
		`{"a":"\u00e9\u20ac"}`:    true,
		`{"\u0000":1}`:            false,
		`{"a":"\ud83d"}`:          false,
		`{"a":"\"\u0001"}`:        true,
		`{"a":"` + `\u00"}`:       true, // truncated escape: the server reports it
		`{"a":"plain","b":[1,2]}`: true,
	} {
		_, err := encodePayload(core.PayloadJSON, []byte(doc))
		if (err == nil) != ok || err != nil && !errors.Is(err, core.ErrInvalidJSON) {
			t.Errorf("encodePayload(%s) = %v, want ok %v (or core.ErrInvalidJSON)", doc, err, ok)
		}
	}
}

func TestPostgresTimeCodec(t *testing.T) {
	t.Parallel()
	d := Dialect
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no zoneinfo: %v", err)
	}
	for _, in := range []time.Time{
		time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.FixedZone("X", -7*3600)),
		time.Date(2024, 3, 10, 2, 30, 0, 1500, time.UTC),
		time.Date(1969, 7, 20, 20, 17, 40, 500, time.UTC),
		time.Date(2024, 11, 3, 1, 30, 0, 0, ny),
	} {
		enc, ok := d.EncodeTime(in).(time.Time)
		want := in.UTC().Truncate(time.Microsecond)
		if !ok || !enc.Equal(want) || enc.Location() != time.UTC {
			t.Fatalf("EncodeTime(%v) = %#v", in, d.EncodeTime(in))
		}
		got, err := d.DecodeTime(in.In(ny))
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("DecodeTime(%v) = %v, %v; want %v", in, got, err, want)
		}
	}
	for s, want := range map[string]time.Time{
		"2024-03-15 10:30:00.123456+05:30": time.Date(2024, 3, 15, 5, 0, 0, 123456000, time.UTC),
		"2024-03-15 10:30:00+00":           time.Date(2024, 3, 15, 10, 30, 0, 0, time.UTC),
		"2024-03-15 10:30:00.5-08":         time.Date(2024, 3, 15, 18, 30, 0, 500000000, time.UTC),
	} {
		for _, v := range []any{s, []byte(s)} {
			if got, err := d.DecodeTime(v); err != nil || !got.Equal(want) || got.Location() != time.UTC {
				t.Errorf("DecodeTime(%T %q) = %v, %v; want %v", v, s, got, err, want)
			}
		}
	}
	for _, bad := range []any{"yesterday", []byte("2024-13-01 00:00:00+00"), int64(1), 1.5} {
		if _, err := d.DecodeTime(bad); err == nil {
			t.Errorf("DecodeTime(%#v) succeeded", bad)
		}
	}
}

func TestPostgresClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want jdbcstore.ErrorClass
	}{
		{&pgconn.PgError{Code: "23505", Message: "duplicate key value violates unique constraint"}, jdbcstore.ClassDuplicate},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "23505"}), jdbcstore.ClassDuplicate},
		{&pgconn.PgError{Code: "40001"}, jdbcstore.ClassBusy},
		{&pgconn.PgError{Code: "40P01"}, jdbcstore.ClassBusy},
		{&pgconn.PgError{Code: "55P03"}, jdbcstore.ClassBusy},
		{&pgconn.PgError{Code: "23503"}, jdbcstore.ClassOther}, // foreign key
		{&pgconn.PgError{Code: "25P02"}, jdbcstore.ClassOther}, // in failed transaction
		{&pgconn.PgError{Code: "57014"}, jdbcstore.ClassOther}, // query canceled
		{(*pgconn.PgError)(nil), jdbcstore.ClassOther},
		{errors.New("plain"), jdbcstore.ClassOther},
		{nil, jdbcstore.ClassOther},
	}
	for _, c := range cases {
		if got := Dialect.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestPostgresDialectBasics(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"pgx", "pgx/v5"} {
		if d, err := jdbcstore.Lookup(driver); err != nil || d != Dialect {
			t.Errorf("Lookup(%q) = %v, %v", driver, d, err)
		}
	}
	if c := Dialect.Capabilities(); !c.SkipLocked || !c.Returning || c.UpdateOrderLimit || c.SilentRollback ||
		c.OnDuplicateKeyUpdate || c.SingleWriter || !c.FailedStatementAbortsTx {
		t.Errorf("caps = %+v", c)
	}
	noServer := sqlx.MustOpen("pgx", "") // does not connect
	defer noServer.Close()
	st, err := jdbcstore.New(noServer, jdbcstore.Config{Table: "order"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Dialect() != Dialect {
		t.Fatalf("dialect for driver pgx = %v", st.Dialect())
	}
	schema := st.SchemaSQL()
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "order" (`,
		`event_id       VARCHAR(36)  COLLATE "C" NOT NULL PRIMARY KEY`,
		"payload        JSONB        NOT NULL",
		`CREATE INDEX IF NOT EXISTS "order_pending_idx"`,
		"WHERE status IN (0, 2);",
		"locked_by", "locked_until", "payload_kind", "TIMESTAMPTZ",
	} {
		if !strings.Contains(schema, want) {
			t.Errorf("schema lacks %q:\n%s", want, schema)
		}
	}
	if n := strings.Count(schema, ";\n"); n != 6 || strings.Contains(schema, "{{") {
		t.Errorf("%d statements (want 6: the table, four indexes, the keys table):\n%s", n, schema)
	}
}
