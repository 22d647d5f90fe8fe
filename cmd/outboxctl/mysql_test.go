package main

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
)

// The commands on MySQL/MariaDB (OUTBOX_TEST_MYSQL_DSN), in a database of
// their own, with a non-default table name.
func TestMySQL(t *testing.T) {
	cfg := testdb.MySQLConfig(t)
	db := testdb.OpenMySQL(t, cfg)
	const table = "ops_outbox"
	store, err := jdbcstore.New(db, jdbcstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	seed(t, store)
	dsn := cfg.FormatDSN()
	base := []string{"--dsn", dsn, "--table", table}
	with := func(args ...string) []string { return append(slices.Clone(base), args...) }

	matches(t, ok(t, with("stats")...),
		`^table ops_outbox on mysql `, `^NEW\s+0\s+2$`, `^DONE\s+1\s+3$`, `^RETRY\s+2\s+1$`, `^DEAD\s+3\s+5$`,
		`^PaymentRequested\s+4$`, `^lag: `)
	var st statsJSON
	decodeJSON(t, ok(t, with("--json", "stats")...), &st)
	if st.Counts != (statusCounts{New: 2, Done: 3, Retry: 1, Dead: 5}) || st.Dialect != "mysql" || st.OldestPending == nil {
		t.Errorf("json stats: %+v", st)
	}
	// The mysql:// form of the DSN works as well, its scheme in any case.
	for _, scheme := range []string{"mysql://", "MYSQL://"} {
		decodeJSON(t, ok(t, "--dsn", scheme+dsn, "--table", table, "--json", "stats"), &st)
		if st.Total != 11 {
			t.Errorf("%s stats: %+v", scheme, st)
		}
	}

	if got := idsIn(ok(t, with("dead", "list", "--tenant", "globex")...)); !slices.Equal(got, []string{"x-4", "x-5"}) {
		t.Errorf("dead list --tenant globex: %v", got)
	}
	var r recordJSON
	decodeJSON(t, ok(t, with("--json", "dead", "show", "x-4")...), &r)
	if r.DoneAt != nil || !strings.HasPrefix(string(r.DiedAt), `"2`) {
		t.Errorf("DEAD event through MySQL: done_at %s died_at %s", r.DoneAt, r.DiedAt)
	}
	if r.PayloadBase64 == nil || *r.PayloadBase64 != base64.StdEncoding.EncodeToString(bytesValue) {
		t.Errorf("bytes payload through MySQL: %+v", r)
	}

	matches(t, ok(t, with("dead", "replay", "--type", "PaymentRequested", "--dry-run")...), `^would replay 4 events`)
	wantCounts(t, store, 2, 3, 1, 5)
	matches(t, ok(t, with("dead", "replay", "--type", "PaymentRequested")...), `^replayed 4 events$`)
	wantCounts(t, store, 6, 3, 1, 1)
	rec, err := store.Get(context.Background(), "x-5")
	if err != nil || rec.Status != core.StatusNew || rec.Attempts != 0 {
		t.Errorf("x-5 after replay: %v attempts %d, %v", rec.Status, rec.Attempts, err)
	}
	// Ids not replayed are named, exit 1; the DEAD one is replayed all the same.
	r3 := cli(t, with("dead", "replay", "--id", "NOPE", "--id", "x-5", "--id", "x-4")...)
	if r3.code != exitFailed || r3.stderr != "outboxctl: dead replay: 2 of the given ids were not replayed: NOPE (not found), x-5 (not DEAD: NEW); the 1 other event replayed\n" {
		t.Errorf("replay of unknown ids: exit %d, stderr %q", r3.code, r3.stderr)
	}
	wantCounts(t, store, 7, 3, 1, 0)

	// The table must exist; a wrong --table says how to fix it.
	line := fails(t, exitFailed, "--dsn", dsn, "stats")
	if !strings.Contains(line, "1146") || !strings.Contains(line, "schema apply") {
		t.Errorf("missing table: %q", line)
	}
	matches(t, ok(t, "--dsn", dsn, "schema", "apply"), "^schema applied: table outbox_event on mysql ")
	matches(t, ok(t, "--dsn", dsn, "stats"), `^total\s+0$`)

	// A wrong password: one line, exit 1, the password never shown.
	bad := cfg.Clone()
	bad.Passwd = "wr0ng-s3cret"
	r2 := cli(t, "--dsn", bad.FormatDSN(), "stats")
	if strings.Contains(r2.stderr+r2.stdout, "wr0ng-s3cret") || (r2.code != 0 && strings.Count(r2.stderr, "\n") != 1) {
		t.Errorf("wrong password: exit %d, stderr %q", r2.code, r2.stderr)
	}
}
