package mysql_test

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
	"github.com/outbox-go/outbox/jdbcstore/storetest"
)

// These tests need a MySQL 8 or MariaDB 10.6+ server: see package
// internal/testdb (OUTBOX_TEST_MYSQL_DSN). Each store gets its own
// database.

// newMySQLStore returns a store with the schema applied on db.
func newMySQLStore(t *testing.T, db *sqlx.DB, cfg jdbcstore.Config) *jdbcstore.Store {
	t.Helper()
	cfg.Dialect = mysqldialect.Dialect
	st, err := jdbcstore.New(db, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatalf("ApplySchema: %v", err)
	}
	return st
}

// mysqlHarness opens a new database per store; edit (optional) changes
// the connection settings of the DSN.
func mysqlHarness(name string, edit func(*mysql.Config)) storetest.Harness {
	return storetest.Harness{Name: name, NewStore: func(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store {
		t.Helper()
		c := testdb.MySQLConfig(t)
		if edit != nil {
			edit(c)
		}
		return newMySQLStore(t, testdb.OpenMySQL(t, c), cfg)
	}, Dialect: mysqldialect.Dialect, LegacyOutboxSchema: legacyOutboxSchema,
		Contend: func(t *testing.T, st *jdbcstore.Store) error {
			return storetest.RowLockContention(t, st, "SET SESSION innodb_lock_wait_timeout = 1")
		}}
}

// skewed makes a connection as unlike UTC as possible: a session time_zone
// of +05:30, a DST location for the driver's loc, parseTime flipped from
// the configured DSN, and placeholders interpolated by the client instead
// of server-side prepared statements.
func skewed(c *mysql.Config) {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	c.Loc = loc
	c.ParseTime = !c.ParseTime
	c.InterpolateParams = true
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+05:30'"
}

// serverFlavor returns "mariadb" or "mysql" for the configured server.
func serverFlavor(t *testing.T) string {
	t.Helper()
	var version string
	if err := testdb.MySQL(t).GetContext(t.Context(), &version, "SELECT VERSION()"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "mariadb"
	}
	return "mysql"
}

// The conformance suite runs unchanged, once with the DSN as configured and
// once with the skewed connection settings.
func TestMySQLConformance(t *testing.T) {
	flavor := serverFlavor(t)
	storetest.Run(t, mysqlHarness(flavor, nil))
	storetest.Run(t, mysqlHarness(flavor+"_tz0530_locNewYork_interpolated", skewed))
}

// Times are stored as the UTC wall clock and read back as exact UTC
// instants, whatever the session time_zone, the driver's loc (including a
// location whose daylight saving gap contains the stored wall clock) and
// parseTime; PollPending compares them exactly across such connections.
func TestMySQLTimesAreUTCWhateverTheConnection(t *testing.T) {
	t.Parallel()
	cfg := testdb.MySQLConfig(t)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	// 2024-03-10 02:30 does not exist in New York (clocks jump from 2:00
	// to 3:00): a driver-side time.Date in that location would move it.
	t0 := time.Date(2024, 3, 10, 2, 30, 0, 123456789, time.UTC)
	clk := &fixedClock{t: t0}
	type conn struct {
		name string
		st   *jdbcstore.Store
	}
	var conns []conn
	for _, v := range []struct {
		name                   string
		parseTime, interpolate bool
		loc                    *time.Location
		zone                   string
	}{
		{"zone+05:30_locNewYork_parseTime", true, false, ny, "+05:30"},
		{"zone-08:00_locKolkata_text_interpolated", false, true, kolkata, "-08:00"},
		{"locLocal_parseTime", true, false, time.Local, ""},
		{"utc_parseTime", true, false, time.UTC, "+00:00"},
	} {
		c := cfg.Clone()
		c.ParseTime, c.InterpolateParams, c.Loc = v.parseTime, v.interpolate, v.loc
		c.Params = map[string]string{}
		if v.zone != "" {
			c.Params["time_zone"] = "'" + v.zone + "'"
		}
		conns = append(conns, conn{v.name, newMySQLStore(t, testdb.OpenMySQL(t, c), jdbcstore.Config{Now: clk.Now})})
	}
	writer, utc := conns[0].st, conns[3].st
	ctx := t.Context()

	occurred := time.Date(2024, 3, 10, 7, 59, 59, 999999999, time.FixedZone("X", 5*3600+1800))
	env := mustBuild(t, core.NewEvent("Zoned").ID("tz-1").OccurredAt(occurred).PayloadJSONString(`{}`))
	if err := writer.Insert(ctx, writer.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}
	nextAt := t0.Add(90 * time.Minute).In(ny) // 2024-03-10 04:00:00.123456 UTC, 00:00 EST
	if ok, err := writer.MarkRetry(ctx, testOwner, "tz-1", nextAt, testLease.Until, "later"); err != nil || !ok {
		t.Fatalf("MarkRetry: %v, %v", ok, err)
	}
	clk.set(t0.Add(time.Microsecond))
	if err := conns[1].st.Insert(ctx, conns[1].st.DB(), mustBuild(t, core.NewEvent("Zoned").ID("tz-2").OccurredAt(t0.Add(time.Microsecond)).PayloadJSONString(`{}`)), testLease); err != nil {
		t.Fatal(err)
	}

	// What is stored is the UTC wall clock, whatever the writer's session.
	var stored []string
	err = utc.DB().SelectContext(ctx, &stored,
		"SELECT CONCAT_WS(' | ', CAST(occurred_at AS CHAR), CAST(created_at AS CHAR), CAST(available_at AS CHAR)) FROM outbox_event ORDER BY event_id")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"2024-03-10 02:29:59.999999 | 2024-03-10 02:30:00.123456 | 2024-03-10 04:00:00.123456",
		"2024-03-10 02:30:00.123457 | 2024-03-10 02:30:00.123457 | 2024-03-10 02:30:00.123457",
	}
	if strings.Join(stored, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stored times:\n%s\nwant:\n%s", strings.Join(stored, "\n"), strings.Join(want, "\n"))
	}

	micro := func(tm time.Time) time.Time { return tm.UTC().Truncate(time.Microsecond) }
	for _, c := range conns {
		rec, err := c.st.Get(ctx, "tz-1")
		if err != nil || rec.DecodeErr != nil {
			t.Fatalf("%s: Get: %v, %v", c.name, err, rec.DecodeErr)
		}
		for _, f := range []struct {
			what      string
			got, want time.Time
		}{
			{"OccurredAt", rec.OccurredAt, micro(occurred)},
			{"CreatedAt", rec.CreatedAt, micro(t0)},
			{"AvailableAt", rec.AvailableAt, micro(nextAt)},
		} {
			if !f.got.Equal(f.want) || f.got.Location() != time.UTC {
				t.Errorf("%s: %s = %s, want %s UTC", c.name, f.what, f.got.Format(time.RFC3339Nano), f.want.Format(time.RFC3339Nano))
			}
		}
		// Exact bounds, evaluated by each connection.
		for _, p := range []struct {
			now  time.Time
			skip time.Duration
			want []string
		}{
			{t0.Add(time.Microsecond).In(kolkata), 0, []string{"tz-2"}},
			{t0.Add(time.Microsecond), time.Microsecond, nil}, // tz-2 created after now-skip
			{t0.Add(2 * time.Microsecond).In(ny), time.Microsecond, []string{"tz-2"}},
			{nextAt.Add(-time.Microsecond), 0, []string{"tz-2"}},
			{nextAt, 0, []string{"tz-2", "tz-1"}},
			{t0, 0, nil}, // tz-2 is not available before it was created
		} {
			recs, err := c.st.PollPending(ctx, p.now, p.skip, 10)
			if err != nil {
				t.Fatalf("%s: PollPending: %v", c.name, err)
			}
			var ids []string
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(p.want) {
				t.Errorf("%s: PollPending(now=%s, skip=%s) = %v, want %v", c.name, p.now.Format(time.RFC3339Nano), p.skip, ids, p.want)
			}
		}
	}
}

// A bytes payload is stored as a JSON string holding its standard base64;
// a JSON payload as the document, queryable with the JSON functions. A
// corrupt stored value becomes the record's DecodeErr, never a failed poll.
func TestMySQLPayloadStorage(t *testing.T) {
	t.Parallel()
	st := newMySQLStore(t, testdb.MySQL(t), jdbcstore.Config{})
	ctx := t.Context()
	bin := []byte{0, 1, 2, 0xfb, 0xff, '"', '\\', '/', 0x80}
	envs := []core.Envelope{
		mustBuild(t, core.NewEvent("B").ID("p-bytes").PayloadBytes(bin)),
		mustBuild(t, core.NewEvent("B").ID("p-empty").PayloadBytes([]byte{})),
		mustBuild(t, core.NewEvent("J").ID("p-json").PayloadJSONString(`{"total": 12.5, "items": [1, 2]}`)),
	}
	for _, env := range envs {
		if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		Type    string `db:"t"`
		Unquote string `db:"u"`
		Raw     string `db:"raw"`
		Kind    int    `db:"payload_kind"`
	}
	var r row
	q := "SELECT JSON_TYPE(payload) AS t, JSON_UNQUOTE(payload) AS u, payload AS raw, payload_kind FROM outbox_event WHERE event_id = ?"
	if err := st.DB().GetContext(ctx, &r, q, "p-bytes"); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(bin)
	if !strings.Contains(b64, "/") {
		t.Fatalf("test payload's base64 %s has no '/'", b64)
	}
	if r.Type != "STRING" || r.Unquote != b64 || r.Raw != `"`+b64+`"` || r.Kind != int(core.PayloadBytes) {
		t.Errorf("bytes payload stored as %+v, want a JSON string of %q", r, b64)
	}
	if err := st.DB().GetContext(ctx, &r, q, "p-empty"); err != nil {
		t.Fatal(err)
	}
	if r.Type != "STRING" || r.Raw != `""` {
		t.Errorf("empty bytes payload stored as %+v, want \"\"", r)
	}
	var total float64
	if err := st.DB().GetContext(ctx, &total, "SELECT JSON_EXTRACT(payload, '$.total') FROM outbox_event WHERE event_id = 'p-json'"); err != nil || total != 12.5 {
		t.Errorf("JSON_EXTRACT(payload, '$.total') = %v, %v; want 12.5", total, err)
	}
	for _, env := range envs {
		rec, err := st.Get(ctx, env.ID())
		if err != nil || rec.DecodeErr != nil {
			t.Fatalf("%s: %v, %v", env.ID(), err, rec.DecodeErr)
		}
		if rec.PayloadKind == core.PayloadBytes && !bytes.Equal(rec.Payload, env.RawPayload()) {
			t.Errorf("%s: payload %x, want %x", env.ID(), rec.Payload, env.RawPayload())
		}
	}

	// Corrupt bytes payloads written by hand: valid JSON, wrong content.
	for _, bad := range []string{`"not base64!"`, `42`, `{"a":1}`, `"AAE"`} {
		if _, err := st.DB().ExecContext(ctx, "UPDATE outbox_event SET payload = ? WHERE event_id = 'p-bytes'", bad); err != nil {
			t.Fatal(err)
		}
		rec, err := st.Get(ctx, "p-bytes")
		if err != nil || rec.DecodeErr == nil {
			t.Errorf("payload %s: Get = %v, DecodeErr %v; want a decode error", bad, err, rec.DecodeErr)
		}
		recs, err := st.PollPending(ctx, time.Now().Add(time.Hour), 0, 10)
		if err != nil || len(recs) != 3 {
			t.Fatalf("payload %s: PollPending = %d records, %v", bad, len(recs), err)
		}
		for _, r := range recs {
			if (r.ID == "p-bytes") != (r.DecodeErr != nil) {
				t.Errorf("payload %s: record %s DecodeErr = %v", bad, r.ID, r.DecodeErr)
			}
		}
	}
	// A JSON string with escapes (another writer) still decodes.
	if _, err := st.DB().ExecContext(ctx, "UPDATE outbox_event SET payload = ? WHERE event_id = 'p-bytes'", `"`+strings.ReplaceAll(b64, "/", `\/`)+`"`); err != nil {
		t.Fatal(err)
	}
	if rec, err := st.Get(ctx, "p-bytes"); err != nil || rec.DecodeErr != nil || !bytes.Equal(rec.Payload, bin) {
		t.Errorf("escaped base64: %x, %v, %v", rec.Payload, err, rec.DecodeErr)
	}
}

// A 1 MiB bytes payload becomes 1,398,106 bytes of JSON; the server's
// max_allowed_packet must carry it (MariaDB 10.11 and MySQL 8 default to
// 16 MiB and 64 MiB).
func TestMySQL1MiBBytesPayload(t *testing.T) {
	t.Parallel()
	st := newMySQLStore(t, testdb.MySQL(t), jdbcstore.Config{})
	ctx := t.Context()
	var packet int64
	if err := st.DB().GetContext(ctx, &packet, "SELECT @@max_allowed_packet"); err != nil {
		t.Fatal(err)
	}
	stored := base64.StdEncoding.EncodedLen(core.MaxPayloadBytes) + 2
	t.Logf("max_allowed_packet = %d; a 1 MiB bytes payload is stored in %d bytes", packet, stored)
	if packet < int64(stored)+64<<10 {
		t.Fatalf("max_allowed_packet = %d cannot carry a 1 MiB bytes payload (%d bytes)", packet, stored)
	}
	bin := make([]byte, core.MaxPayloadBytes)
	for i := range bin {
		bin[i] = byte(i*7 + i>>8)
	}
	env := mustBuild(t, core.NewEvent("Big").ID("big").PayloadBytes(bin))
	if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.DB().GetContext(ctx, &n, "SELECT LENGTH(payload) FROM outbox_event WHERE event_id = 'big'"); err != nil || n != stored {
		t.Errorf("LENGTH(payload) = %d, %v; want %d", n, err, stored)
	}
	rec, err := st.Get(ctx, "big")
	if err != nil || rec.DecodeErr != nil || !bytes.Equal(rec.Payload, bin) {
		t.Fatalf("round trip: %d bytes, %v, %v", len(rec.Payload), err, rec.DecodeErr)
	}
}

// Every text column holds its full length in 4-byte characters; one more
// character is rejected by validation before reaching the database.
func TestMySQLFourByteCharactersAtFullLength(t *testing.T) {
	t.Parallel()
	st := newMySQLStore(t, testdb.MySQL(t), jdbcstore.Config{})
	ctx := t.Context()
	r := func(n int) string { return strings.Repeat("🙂", n) }
	b := func() *core.Builder {
		return core.NewEvent(r(core.MaxEventTypeLen)).ID(r(core.MaxEventIDLen)).
			AggregateType(r(core.MaxAggregateTypeLen)).AggregateID(r(core.MaxAggregateIDLen)).
			TenantID(r(core.MaxTenantIDLen)).Header(r(100), r(1000)).PayloadJSONString(`{"🙂":"` + r(1000) + `"}`)
	}
	env := mustBuild(t, b())
	if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}
	var lens struct {
		ID  int `db:"id"`
		ET  int `db:"et"`
		AT  int `db:"at"`
		AI  int `db:"ai"`
		Ten int `db:"ten"`
	}
	err := st.DB().GetContext(ctx, &lens, `SELECT LENGTH(event_id) AS id, CHAR_LENGTH(event_type) AS et,
		CHAR_LENGTH(aggregate_type) AS at, CHAR_LENGTH(aggregate_id) AS ai, CHAR_LENGTH(tenant_id) AS ten FROM outbox_event`)
	if err != nil {
		t.Fatal(err)
	}
	if lens.ID != 4*core.MaxEventIDLen || lens.ET != core.MaxEventTypeLen || lens.AT != core.MaxAggregateTypeLen ||
		lens.AI != core.MaxAggregateIDLen || lens.Ten != core.MaxTenantIDLen {
		t.Errorf("stored lengths %+v", lens)
	}
	rec, err := st.Get(ctx, env.ID())
	if err != nil || rec.DecodeErr != nil {
		t.Fatal(err, rec.DecodeErr)
	}
	got, err := rec.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != env.ID() || got.Type() != env.Type() || got.AggregateType() != env.AggregateType() ||
		got.AggregateID() != env.AggregateID() || got.TenantID() != env.TenantID() {
		t.Error("text fields differ after the round trip")
	}
	if v, _ := got.Header(r(100)); v != r(1000) {
		t.Error("header differs after the round trip")
	}
	const msg = "💥"
	if ok, err := st.MarkDead(ctx, testOwner, env.ID(), strings.Repeat(msg, 5000)); err != nil || !ok {
		t.Fatalf("MarkDead with 4000 4-byte characters: %v, %v", ok, err)
	}
	if rec, _ := st.Get(ctx, env.ID()); rec.LastError != strings.Repeat(msg, jdbcstore.DefaultMaxErrorLen) {
		t.Errorf("last_error holds %d bytes", len(rec.LastError))
	}
	if _, err := core.NewEvent(r(core.MaxEventTypeLen + 1)).PayloadJSONString(`{}`).Build(); !errors.Is(err, core.ErrEventTypeTooLong) {
		t.Errorf("event type of %d characters: err = %v", core.MaxEventTypeLen+1, err)
	}
}

// Event ids compare byte for byte: case, trailing spaces and accents make
// different ids. A duplicate is core.ErrDuplicateEvent, in autocommit and
// inside a transaction, which stays usable (MySQL rolls back the failed
// statement only).
func TestMySQLEventIDsAreExact(t *testing.T) {
	t.Parallel()
	st := newMySQLStore(t, testdb.MySQL(t), jdbcstore.Config{})
	ctx := t.Context()
	ids := []string{"evt-a", "EVT-A", "evt-a ", " evt-a", "evt-á", "evt-a\t"}
	for _, id := range ids {
		if err := st.Insert(ctx, st.DB(), mustBuild(t, core.NewEvent("T").ID(id).PayloadJSONString(`{}`)), testLease); err != nil {
			t.Fatalf("insert %q: %v", id, err)
		}
	}
	for _, id := range ids {
		rec, err := st.Get(ctx, id)
		if err != nil || rec.ID != id {
			t.Errorf("Get(%q) = %q, %v", id, rec.ID, err)
		}
	}
	dup := mustBuild(t, core.NewEvent("T").ID("evt-a").PayloadJSONString(`{"again":true}`))
	if err := st.Insert(ctx, st.DB(), dup, testLease); !errors.Is(err, core.ErrDuplicateEvent) {
		t.Fatalf("autocommit duplicate: err = %v", err)
	}
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(ctx, tx, dup, testLease); !errors.Is(err, core.ErrDuplicateEvent) {
		_ = tx.Rollback()
		t.Fatalf("duplicate in transaction: err = %v", err)
	}
	if err := st.Insert(ctx, tx, mustBuild(t, core.NewEvent("T").ID("evt-after-dup").PayloadJSONString(`{}`)), testLease); err != nil {
		_ = tx.Rollback()
		t.Fatalf("insert after the duplicate in the same transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if c, err := st.CountByStatus(ctx); err != nil || c[core.StatusNew] != len(ids)+1 {
		t.Errorf("NEW rows = %v, %v; want %d", c, err, len(ids)+1)
	}
}

// The schema is idempotent and has the documented shape; the longest
// accepted table name works (the index name does not derive from it).
func TestMySQLSchema(t *testing.T) {
	t.Parallel()
	db := testdb.MySQL(t)
	ctx := t.Context()
	st := newMySQLStore(t, db, jdbcstore.Config{})
	insertOne(t, st, "kept")
	for range 2 {
		if err := st.ApplySchema(ctx); err != nil {
			t.Fatalf("ApplySchema again: %v", err)
		}
	}
	if _, err := st.Get(ctx, "kept"); err != nil {
		t.Fatalf("row lost by ApplySchema: %v", err)
	}

	type column struct {
		Name      string  `db:"COLUMN_NAME"`
		Type      string  `db:"COLUMN_TYPE"`
		Nullable  string  `db:"IS_NULLABLE"`
		Collation *string `db:"COLLATION_NAME"`
	}
	var cols []column
	err := db.SelectContext(ctx, &cols, `SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLLATION_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_event' ORDER BY ORDINAL_POSITION`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]column{}
	for _, c := range cols {
		got[c.Name] = c
	}
	for name, typ := range map[string]string{
		"event_id": "varbinary(144)", "event_type": "varchar(128)", "aggregate_type": "varchar(64)",
		"aggregate_id": "varchar(128)", "tenant_id": "varchar(64)", "locked_by": "varchar(64)",
		"occurred_at": "datetime(6)", "available_at": "datetime(6)", "created_at": "datetime(6)",
		"done_at": "datetime(6)", "locked_until": "datetime(6)", "status": "tinyint", "payload_kind": "tinyint",
		"attempts": "int", "last_error": "text",
	} {
		// MySQL 8 and MariaDB show integer display widths differently.
		if c, ok := got[name]; !ok || !strings.HasPrefix(c.Type, typ) {
			t.Errorf("column %s is %q, want %s", name, c.Type, typ)
		}
	}
	for _, name := range []string{"payload", "headers"} {
		// MySQL 8: json; MariaDB: an alias of longtext with a json_valid check.
		if c := got[name].Type; c != "json" && c != "longtext" {
			t.Errorf("column %s is %q, want json", name, c)
		}
	}
	if c := got["event_type"]; c.Collation == nil || *c.Collation != "utf8mb4_bin" {
		t.Errorf("event_type collation = %v, want utf8mb4_bin", c.Collation)
	}
	if got["payload"].Nullable != "NO" || got["headers"].Nullable != "YES" {
		t.Errorf("payload/headers nullability = %s/%s", got["payload"].Nullable, got["headers"].Nullable)
	}
	var index []string
	err = db.SelectContext(ctx, &index, `SELECT COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_event' AND INDEX_NAME = 'idx_status_available' ORDER BY SEQ_IN_INDEX`)
	if err != nil || strings.Join(index, ",") != "status,available_at,created_at" {
		t.Errorf("idx_status_available = %v, %v", index, err)
	}
	var engine string
	if err := db.GetContext(ctx, &engine, `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_event'`); err != nil || engine != "InnoDB" {
		t.Errorf("engine = %q, %v", engine, err)
	}
	// A JSON column rejects what is not JSON (MariaDB through its CHECK).
	if _, err := db.ExecContext(ctx, "UPDATE outbox_event SET payload = 'not json'"); err == nil {
		t.Error("the payload column accepted invalid JSON")
	}

	long := newMySQLStore(t, db, jdbcstore.Config{Table: strings.Repeat("t", 48)})
	insertOne(t, long, "long-name")
}

func mustBuild(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func insertOne(t *testing.T, st *jdbcstore.Store, id string) {
	t.Helper()
	if err := st.Insert(t.Context(), st.DB(), mustBuild(t, core.NewEvent("T").ID(id).PayloadJSONString(`{}`)), testLease); err != nil {
		t.Fatalf("insert %s: %v", id, err)
	}
}

// fixedClock is a settable Config.Now.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fixedClock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

const testOwner = "mysql-test-owner"

var testLease = core.Lease{Owner: testOwner, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}

// legacyOutboxSchema is the outbox table of an earlier release, which
// ApplySchema must upgrade.
//
//go:embed testdata/outbox_v0.1.sql
var legacyOutboxSchema string
