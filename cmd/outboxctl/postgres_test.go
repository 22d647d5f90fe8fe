package main

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
)

// The commands on PostgreSQL (OUTBOX_TEST_POSTGRES_DSN), in a schema of
// their own, with a non-default table name.
func TestPostgres(t *testing.T) {
	dsn := testdb.PostgresSchemaDSN(t)
	db := testdb.OpenPostgres(t, dsn)
	const table = "ops_outbox"
	store, err := jdbcstore.New(db, jdbcstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	seed(t, store)
	base := []string{"--dsn", dsn, "--table", table}
	with := func(args ...string) []string { return append(slices.Clone(base), args...) }

	matches(t, ok(t, with("stats")...),
		`^table ops_outbox on postgres `, `^NEW\s+0\s+2$`, `^DONE\s+1\s+3$`, `^RETRY\s+2\s+1$`, `^DEAD\s+3\s+5$`,
		`^PaymentRequested\s+4$`, `^lag: `)
	var st statsJSON
	decodeJSON(t, ok(t, with("--json", "stats")...), &st)
	if st.Counts != (statusCounts{New: 2, Done: 3, Retry: 1, Dead: 5}) || st.Dialect != "postgres" || st.OldestPending == nil {
		t.Errorf("json stats: %+v", st)
	}
	if got := idsIn(ok(t, with("dead", "list", "--tenant", "globex")...)); !slices.Equal(got, []string{"x-4", "x-5"}) {
		t.Errorf("dead list --tenant globex: %v", got)
	}
	var r recordJSON
	decodeJSON(t, ok(t, with("--json", "dead", "show", "x-4")...), &r)
	if r.PayloadBase64 == nil || *r.PayloadBase64 != base64.StdEncoding.EncodeToString(bytesValue) {
		t.Errorf("bytes payload through PostgreSQL: %+v", r)
	}
	matches(t, ok(t, with("dead", "replay", "--type", "PaymentRequested", "--dry-run")...), `^would replay 4 events`)
	matches(t, ok(t, with("dead", "replay", "--type", "PaymentRequested")...), `^replayed 4 events$`)
	wantCounts(t, store, 6, 3, 1, 1)

	// The scheme in any case (pgx read POSTGRES://… as a key=value string
	// and failed to connect).
	_, rest, _ := strings.Cut(dsn, "://")
	for _, scheme := range []string{"POSTGRES", "PostgreSQL"} {
		matches(t, ok(t, "--dsn", scheme+"://"+rest, "--table", table, "stats"), `^table ops_outbox on postgres `, `^total\s+11$`)
	}

	// The table must exist; a wrong --table says how to fix it.
	line := fails(t, exitFailed, "--dsn", dsn, "stats")
	if !strings.Contains(line, "42P01") || !strings.Contains(line, "schema apply") {
		t.Errorf("missing table: %q", line)
	}
	matches(t, ok(t, "--dsn", dsn, "schema", "apply"), "^schema applied: table outbox_event on postgres ")
	matches(t, ok(t, "--dsn", dsn, "stats"), `^total\s+0$`)

	// serve finds a mixed-case table as the other commands do (its probe
	// looked for the folded name "mixedops" and did not start).
	matches(t, ok(t, "--dsn", dsn, "--table", "MixedOps", "schema", "apply"), "^schema applied: table MixedOps on postgres ")
	matches(t, ok(t, "--dsn", dsn, "--table", "MixedOps", "stats"), `^total\s+0$`)
	if code, body := getPage(t, startServe(t, "--dsn", dsn, "--table", "MixedOps", "serve")); code != 200 {
		t.Errorf("serve --table MixedOps: GET / = %d\n%s", code, body)
	}

	// A password in the URL is never shown (the test server trusts every
	// password, so the command succeeds).
	withPass := strings.Replace(dsn, "://postgres@", "://postgres:wr0ng-s3cret@", 1)
	if withPass == dsn {
		t.Skipf("OUTBOX_TEST_POSTGRES_DSN is not of the form postgres://postgres@...: %s", dsn)
	}
	r2 := cli(t, "--dsn", withPass, "--json", "stats")
	if strings.Contains(r2.stderr+r2.stdout, "wr0ng-s3cret") {
		t.Errorf("password shown: exit %d, stdout %q, stderr %q", r2.code, r2.stdout, r2.stderr)
	}
}
