package jdbcstore_test

import (
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/inboxrow"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

func TestDialectDetection(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, jdbcstore.Config{})
	if st.Dialect() != sqlite.Dialect {
		t.Fatalf("dialect for sqlite3 = %v", st.Dialect())
	}
	if d, err := jdbcstore.Lookup("sqlite3"); d != sqlite.Dialect || err != nil {
		t.Errorf("Lookup(sqlite3) = %v, %v", d, err)
	}
	// A *sqlx.DB named after no dialect is detected by its driver (the
	// unsupported drivers: TestUnsupportedDriver).
	other := sqlx.NewDb(st.DB().DB, "custom_sqlite")
	named, err := jdbcstore.New(other, jdbcstore.Config{})
	if err != nil || named.Dialect() != sqlite.Dialect {
		t.Fatalf("a *sqlx.DB named custom_sqlite over the sqlite3 driver: %v, %v; want the sqlite dialect", named, err)
	}
	if _, err := inboxrow.Open(other, inboxrow.Options{Table: "inbox_message"}); err != nil {
		t.Errorf("inbox store on it: err = %v", err)
	}
	if _, err := jdbcstore.New(other, jdbcstore.Config{Dialect: sqlite.Dialect}); err != nil {
		t.Fatalf("with Dialect: %v", err)
	}
}

func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	noServer := sqlx.MustOpen("sqlite3", "") // does not connect
	defer noServer.Close()
	st, err := jdbcstore.New(noServer, jdbcstore.Config{Table: "events_x"})
	if err != nil {
		t.Fatal(err)
	}
	sql := st.SchemaSQL()
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "events_x" (`,
		`CREATE INDEX IF NOT EXISTS "events_x_pending_idx"`,
		`ON "events_x" (available_at, created_at, event_id) WHERE status IN (0, 2);`,
		`CREATE INDEX IF NOT EXISTS "events_x_finished_idx"`,
		`ON "events_x" (status, done_at) WHERE status IN (1, 3);`,
		`DROP INDEX IF EXISTS "events_x_status_done_idx";`,
		`CREATE INDEX IF NOT EXISTS "events_x_retry_idx"`,
		`ON "events_x" (event_id) WHERE status = 2;`,
		"locked_by", "locked_until", "payload_kind",
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("schema lacks %q:\n%s", want, sql)
		}
	}
	if strings.Contains(sql, "{{") {
		t.Errorf("unrendered template:\n%s", sql)
	}
	if n := len(jdbcstore.SplitStatements(sql)); n != 8 {
		t.Errorf("%d statements, want 8 (the table, five indexes, the old status index dropped, the order trigger; SQLite keeps no keys table)", n)
	}
}

// Every statement has exactly the placeholders its documented arguments
// fill, and uses the quoted table.
func TestStatements(t *testing.T) {
	t.Parallel()
	q := jdbcstore.StatementText(sqlite.Dialect, "tbl")
	cases := []struct {
		name, sql string
		args      int
	}{
		{"insert", q["insert"], 16},
		{"markDone1", q["markDone1"], 3},
		{"markDone3", q["markDone3"], 5},
		{"markRetry", q["markRetry"], 5},
		{"markDead", q["markDead"], 4},
		{"poll", q["poll"], 3},
		// owner, lease_until, the claimable arguments, limit: one
		// statement along the partial pending index.
		{"claimReturning", q["claimReturning"], 7},
		{"claimSelect", q["claimSelect"], 5},
		{"reap", q["reap"], 2},
		{"get", q["get"], 1},
		{"countByStatus", q["countByStatus"], 0},
	}
	for _, c := range cases {
		if n := strings.Count(c.sql, "?"); n != c.args {
			t.Errorf("%s has %d placeholders, want %d: %s", c.name, n, c.args, c.sql)
		}
		if !strings.Contains(c.sql, `"tbl"`) {
			t.Errorf("%s does not use the quoted table: %s", c.name, c.sql)
		}
	}
	for _, s := range []string{q["markDone1"], q["markRetry"], q["markDead"]} {
		if !strings.HasSuffix(s, "AND status <> 1 AND locked_by = ?") {
			t.Errorf("status write not guarded against DONE and fenced on the owner: %s", s)
		}
	}
}
