package mysql

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// The dialect's payload codec is internal/jsoncol's (fuzzed there); the
// dialect only adapts the scanned value.
func TestMySQLPayloadUsesTheJSONColumnCodec(t *testing.T) {
	t.Parallel()
	for _, p := range [][]byte{{0, 1, 0xff}, {}} {
		enc, err := Dialect.EncodePayload(core.PayloadBytes, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []any{enc, []byte(enc.(string))} {
			if got, err := Dialect.DecodePayload(core.PayloadBytes, v); err != nil || !bytes.Equal(got, p) {
				t.Errorf("DecodePayload(%T %q) = %x, %v; want %x", v, enc, got, err, p)
			}
		}
	}
	if _, err := Dialect.DecodePayload(core.PayloadJSON, nil); err == nil {
		t.Error("a NULL payload decoded")
	}
}

func TestMySQLTimeCodec(t *testing.T) {
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
		time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2024, 11, 3, 1, 30, 0, 0, ny), // the ambiguous hour
	} {
		enc := d.EncodeTime(in)
		s, ok := enc.(string)
		if !ok || len(s) != len(mysqlTimeLayout) {
			t.Fatalf("encodeTime(%v) = %#v", in, enc)
		}
		want := in.UTC().Truncate(time.Microsecond)
		for _, v := range []any{s, []byte(s)} {
			got, err := d.DecodeTime(v)
			if err != nil || !got.Equal(want) || got.Location() != time.UTC {
				t.Errorf("decodeTime(%T %q) = %v, %v; want %v", v, s, got, err, want)
			}
		}
	}
	if got := d.EncodeTime(time.Date(2024, 1, 2, 3, 4, 5, 999999999, time.UTC)); got != "2024-01-02 03:04:05.999999" {
		t.Errorf("encodeTime rounds: %v", got)
	}
	// A time.Time from the driver (parseTime=true): its wall clock is UTC
	// whatever location the driver attached.
	k := time.FixedZone("IST", 5*3600+1800)
	if got, err := d.DecodeTime(time.Date(2024, 3, 15, 10, 30, 0, 123456789, k)); err != nil ||
		!got.Equal(time.Date(2024, 3, 15, 10, 30, 0, 123456000, time.UTC)) || got.Location() != time.UTC {
		t.Errorf("decodeTime(time.Time in IST) = %v, %v", got, err)
	}
	// Fewer fractional digits, as a hand-written query may return.
	if got, err := d.DecodeTime("2024-03-15 10:30:00"); err != nil || !got.Equal(time.Date(2024, 3, 15, 10, 30, 0, 0, time.UTC)) {
		t.Errorf("decodeTime without fraction = %v, %v", got, err)
	}
	if got, err := d.DecodeTime(nil); err != nil || !got.IsZero() {
		t.Errorf("decodeTime(nil) = %v, %v", got, err)
	}
	for _, bad := range []any{"2024-01-01T00:00:00Z", "0000-00-00 00:00:00", "", []byte("2024-02-30 00:00:00"), time.Time{}, int64(1), 1.5} {
		if _, err := d.DecodeTime(bad); err == nil {
			t.Errorf("decodeTime(%#v) succeeded", bad)
		}
	}
}

func TestMySQLClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want jdbcstore.ErrorClass
	}{
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, jdbcstore.ClassDuplicate},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1062}), jdbcstore.ClassDuplicate},
		{&mysql.MySQLError{Number: 1586}, jdbcstore.ClassDuplicate},
		{&mysql.MySQLError{Number: 1213}, jdbcstore.ClassBusy},
		{&mysql.MySQLError{Number: 1205}, jdbcstore.ClassBusy},
		{&mysql.MySQLError{Number: 1064}, jdbcstore.ClassOther},
		{&mysql.MySQLError{Number: 4025}, jdbcstore.ClassOther}, // CHECK constraint
		{mysql.ErrInvalidConn, jdbcstore.ClassOther},
		{errors.New("plain"), jdbcstore.ClassOther},
		{nil, jdbcstore.ClassOther},
	}
	for _, c := range cases {
		if got := Dialect.Classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestMySQLDialectBasics(t *testing.T) {
	t.Parallel()
	if Dialect.Name() != "mysql" || mustLookup(t, "mysql") != Dialect {
		t.Errorf("Name %q, detection %v", Dialect.Name(), mustLookup(t, "mysql"))
	}
	if c := Dialect.Capabilities(); !c.SkipLocked || c.Returning || !c.UpdateOrderLimit || !c.SilentRollback || !c.OnDuplicateKeyUpdate || c.SingleWriter {
		t.Errorf("caps = %+v", c)
	}
	noServer := sqlx.MustOpen("mysql", "") // does not connect
	defer noServer.Close()
	st, err := jdbcstore.New(noServer, jdbcstore.Config{Table: "order"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Dialect() != Dialect {
		t.Fatalf("dialect for driver mysql = %v", st.Dialect())
	}
	schema := st.SchemaSQL()
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS `order` (",
		"event_id       VARBINARY(144) NOT NULL",
		"payload        JSON           NOT NULL",
		"KEY idx_status_available (status, available_at, created_at)",
		"KEY idx_status_done (status, done_at, event_type)",
		"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;",
		"locked_by", "locked_until", "payload_kind",
	} {
		if !strings.Contains(schema, want) {
			t.Errorf("schema lacks %q:\n%s", want, schema)
		}
	}
	if n := strings.Count(schema, ";"); n != 2 || strings.Contains(schema, "{{") {
		t.Errorf("%d statements (want 2: the table, its keys table):\n%s", n, schema)
	}
}

func mustLookup(t *testing.T, driver string) jdbcstore.Dialect {
	t.Helper()
	d, err := jdbcstore.Lookup(driver)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
