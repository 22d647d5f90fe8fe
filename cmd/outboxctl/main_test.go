package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

func TestMain(m *testing.M) {
	// The tests say which database they use; a developer's $OUTBOX_DSN
	// must not leak in.
	os.Unsetenv(envDSN)
	os.Exit(m.Run())
}

// result is what one in-process run of outboxctl produced.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs outboxctl with args in process.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// ok runs outboxctl and fails the test unless it exits 0 with nothing on
// stderr; it returns stdout.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("outboxctl %q: exit %d\nstderr: %s\nstdout:\n%s", args, r.code, r.stderr, r.stdout)
	}
	return r.stdout
}

// fails runs outboxctl and checks it exits with code, one line on stderr
// starting with "outboxctl: " and nothing on stdout. It returns the line.
func fails(t *testing.T, code int, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.code != code {
		t.Fatalf("outboxctl %q: exit %d, want %d\nstderr: %s\nstdout:\n%s", args, r.code, code, r.stderr, r.stdout)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") || !strings.HasPrefix(r.stderr, "outboxctl: ") {
		t.Fatalf("outboxctl %q: stderr is not one line starting with %q:\n%s", args, "outboxctl: ", r.stderr)
	}
	if r.stdout != "" {
		t.Fatalf("outboxctl %q: failed but printed on stdout:\n%s", args, r.stdout)
	}
	return strings.TrimSuffix(r.stderr, "\n")
}

// decodeJSON unmarshals out into v, failing the test on error.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, out)
	}
}

// matches fails the test unless out matches every pattern (multi-line).
func matches(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile("(?m)" + p).MatchString(out) {
			t.Errorf("output does not match %q:\n%s", p, out)
		}
	}
}

// The rows every test database holds, by id. Ids sort in this order.
const (
	longError = "connection reset by peer while calling the payment provider at https://pay.example/v1/charges"
)

var (
	newIDs   = []string{"n-1", "n-2"}
	doneIDs  = []string{"d-1", "d-2", "d-3"}
	retryIDs = []string{"r-1"}
	// x-1..x-3 and x-5 are PaymentRequested, x-4 is Email (bytes payload);
	// x-1..x-3 belong to tenant acme, x-4 and x-5 to globex.
	deadIDs    = []string{"x-1", "x-2", "x-3", "x-4", "x-5"}
	bytesValue = []byte{0, 1, 2, 0xff, 'h', 'i'}
)

// seed fills store (with its schema applied) with 2 NEW, 3 DONE, 1 RETRY
// and 5 DEAD events through the library: inserted leased to owner "o",
// then marked by "o".
func seed(t *testing.T, store *jdbcstore.Store) {
	t.Helper()
	ctx := context.Background()
	lease := core.Lease{Owner: "o", Until: time.Now().Add(24 * time.Hour)}
	insert := func(b *core.Builder) {
		t.Helper()
		env, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Insert(ctx, store.DB(), env, lease); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range append(append(append([]string{}, newIDs...), doneIDs...), retryIDs...) {
		typ := "OrderPlaced"
		if strings.HasPrefix(id, "r-") {
			typ = "PaymentRequested"
		}
		insert(core.NewEvent(typ).ID(id).AggregateType("Order").AggregateID("o-" + id).PayloadJSONString(`{"n":1}`))
	}
	for _, id := range deadIDs {
		b := core.NewEvent("PaymentRequested").ID(id).AggregateType("Payment").AggregateID("p-"+id).
			Header("trace", "t-"+id).Header("source", "checkout").PayloadJSONString(`{"amount":42,"id":"` + id + `"}`)
		if id == "x-4" {
			b = core.NewEvent("Email").ID(id).PayloadBytes(bytesValue)
		}
		if id <= "x-3" {
			b = b.TenantID("acme")
		} else {
			b = b.TenantID("globex")
		}
		insert(b)
	}
	if n, err := store.MarkDone(ctx, "o", doneIDs); err != nil || n != int64(len(doneIDs)) {
		t.Fatalf("MarkDone: %d, %v", n, err)
	}
	later := time.Now().Add(time.Hour)
	if ok, err := store.MarkRetry(ctx, "o", "r-1", later, later, "timeout"); err != nil || !ok {
		t.Fatalf("MarkRetry: %v, %v", ok, err)
	}
	for _, id := range deadIDs {
		msg := "payment provider unavailable"
		if id == "x-5" {
			msg = longError + "\nsecond line"
		}
		// Two failed deliveries: RETRY, then DEAD, so attempts is 2.
		if ok, err := store.MarkRetry(ctx, "o", id, time.Now(), later, "first try failed"); err != nil || !ok {
			t.Fatalf("MarkRetry %s: %v, %v", id, ok, err)
		}
		if ok, err := store.MarkDead(ctx, "o", id, msg); err != nil || !ok {
			t.Fatalf("MarkDead %s: %v, %v", id, ok, err)
		}
	}
}

// sqliteDB creates a seeded SQLite database file and returns its path and
// a store on it for checking what the commands did.
func sqliteDB(t *testing.T) (string, *jdbcstore.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	seed(t, store)
	return path, store
}

// counts returns the events per status.
func counts(t *testing.T, store *jdbcstore.Store) map[core.Status]int {
	t.Helper()
	c, err := store.CountByStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantCounts(t *testing.T, store *jdbcstore.Store, newN, done, retry, dead int) {
	t.Helper()
	got := counts(t, store)
	want := map[core.Status]int{core.StatusNew: newN, core.StatusDone: done, core.StatusRetry: retry, core.StatusDead: dead}
	for s, n := range want {
		if got[s] != n {
			t.Errorf("%v: %d events, want %d (all: %v)", s, got[s], n, got)
		}
	}
}

// eachCommand calls fn with the path of every command, groups included.
func eachCommand(fn func(c *command)) {
	var walk func([]*command)
	walk = func(cmds []*command) {
		for _, c := range cmds {
			fn(c)
			walk(c.subs)
		}
	}
	walk(commandTree())
}

// Every command, group and the root answer --help and -h with their usage
// on stdout and exit status 0, without touching a database.
func TestHelp(t *testing.T) {
	out := ok(t, "--help")
	matches(t, out, `^Usage:`, `dead replay`, `schema apply`, `-dsn`, `Exit status`)
	ok(t, "help")
	// help answers --help too, as "help help" does.
	helpUsage := ok(t, "help", "--help")
	if !strings.HasPrefix(helpUsage, "Usage: outboxctl help [command]\n") {
		t.Errorf("help --help:\n%s", helpUsage)
	}
	for _, args := range [][]string{{"help", "-h"}, {"help", "help"}, {"help", "help", "--help"}, {"--json", "help", "--help"}} {
		if got := ok(t, args...); got != helpUsage {
			t.Errorf("outboxctl %q differs from help --help:\n%s", args, got)
		}
	}
	eachCommand(func(c *command) {
		words := strings.Fields(c.path)
		for _, flagName := range []string{"--help", "-h"} {
			out := ok(t, append(words, flagName)...)
			if !strings.HasPrefix(out, "Usage: outboxctl [global flags] "+c.path) {
				t.Errorf("%s %s: usage does not start with the command:\n%s", c.path, flagName, out)
			}
		}
		if help := ok(t, append([]string{"help"}, words...)...); help != ok(t, append(words, "--help")...) {
			t.Errorf("help %s differs from %s --help", c.path, c.path)
		}
		for _, flagName := range []string{"--help", "-h"} {
			if help := ok(t, append(append([]string{"help"}, words...), flagName)...); help != ok(t, append(words, "--help")...) {
				t.Errorf("help %s %s differs from %s --help", c.path, flagName, c.path)
			}
		}
		if len(c.subs) == 0 {
			// Global flags before the command, and a missing database, do
			// not stop --help.
			out := ok(t, append(append([]string{"--dsn", "/nonexistent/x.db", "--json"}, words...), "--help")...)
			if !strings.Contains(out, "Global flags") {
				t.Errorf("%s --help does not list the global flags:\n%s", c.path, out)
			}
		}
	})
	out = ok(t, "dead", "replay", "--help")
	matches(t, out, `-id id`, `-dry-run`, `-all`, `-batch int`)
}

// Bad usage exits 2 with one line on stderr naming the problem.
func TestBadUsage(t *testing.T) {
	path, store := sqliteDB(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "missing command"},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"help", "frob"}, `unknown command "frob"`},
		{[]string{"help", "help", "frob"}, `help: unexpected argument "frob"`},
		{[]string{"--dsn", path, "stats", "--bogus"}, "stats: flag provided but not defined: -bogus"},
		{[]string{"--dsn", path, "stats", "extra"}, `stats: unexpected argument "extra"`},
		{[]string{"--dsn", path, "dead"}, "dead: missing subcommand: want list, show, replay or discard"},
		{[]string{"--dsn", path, "dead", "frob"}, `dead: unknown subcommand "frob"`},
		{[]string{"--dsn", path, "dead", "--json", "list"}, "flag --json before the subcommand: write outboxctl dead <list|show|replay|discard> [flags]"},
		{[]string{"--dsn", path, "dead", "show"}, "dead show: missing argument ID"},
		{[]string{"--dsn", path, "dead", "show", "a", "b"}, `dead show: unexpected argument "b"`},
		{[]string{"--dsn", path, "dead", "list", "--limit", "0"}, "--limit must be 1..1000"},
		{[]string{"--dsn", path, "dead", "list", "--limit", "x"}, `invalid value "x" for flag -limit`},
		{[]string{"--dsn", path, "dead", "list", "--since", "yesterday"}, `invalid time "yesterday"`},
		{[]string{"--dsn", path, "dead", "list", "--since", "1h", "--until", "2h"}, "is not before --until"},
		// The zero time would mean no bound: every event of the type.
		{[]string{"--dsn", path, "dead", "discard", "--type", "PaymentRequested", "--until", "0001-01-01", "--dry-run"}, `invalid time "0001-01-01": must be after 0001-01-01T00:00:00Z`},
		{[]string{"--dsn", path, "dead", "discard", "--type", "PaymentRequested", "--until", "0001-01-01T00:00:00Z"}, "must be after 0001-01-01T00:00:00Z"},
		{[]string{"--dsn", path, "dead", "replay", "--type", "PaymentRequested", "--until", "0001-01-01T00:30:00+01:00"}, "must be after 0001-01-01T00:00:00Z"},
		{[]string{"--dsn", path, "dead", "list", "--since", "0001-01-01"}, "must be after 0001-01-01T00:00:00Z"},
		{[]string{"--dsn", path, "dead", "replay"}, "nothing selected"},
		{[]string{"--dsn", path, "dead", "replay", "--dry-run"}, "nothing selected"},
		{[]string{"--dsn", path, "dead", "replay", "--all", "--type", "T"}, "do not combine it"},
		{[]string{"--dsn", path, "dead", "replay", "--all", "--batch", "0"}, "--batch must be 1..1000"},
		{[]string{"--dsn", path, "purge"}, "give --done-older-than, --dead-older-than or both"},
		{[]string{"--dsn", path, "purge", "--done-older-than", "0s"}, "--done-older-than must be positive"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "-1h"}, "must not be negative"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "7 days"}, "invalid duration"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--batch", "0"}, "--batch must be 1..10000"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--batch", "10001"}, "--batch must be 1..10000"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--pause-factor", "-1"}, "--pause-factor must be 0..99"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--pause-factor", "100"}, "--pause-factor must be 0..99"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--pause-factor", "NaN"}, "--pause-factor must be 0..99"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--max-rate", "-5"}, "--max-rate must be a number of rows per second"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--max-rate", "+Inf"}, "--max-rate must be a number of rows per second"},
		{[]string{"--dsn", path, "purge", "--dead-older-than", "1h", "--max-rate", "fast"}, "invalid value"},
		{[]string{"--dsn", path, "--table", "bad-name", "stats"}, `Table "bad-name" must match`},
		{[]string{"--dsn", path, "--timeout", "0s", "stats"}, "--timeout must be positive"},
		{[]string{"--dsn", path, "dead", "list", "--after", "\xff"}, "--after must be an event id"},
		{[]string{"--dsn", path, "dead", "list", "--after", "a\x00b"}, "--after must be an event id"},
		// Refused before connecting: a server that cannot be reached does not hide it.
		{[]string{"--dsn", "postgres://u@127.0.0.1:1/x", "dead", "list", "--after", "\xff"}, "--after must be an event id"},
		{[]string{"stats"}, "no database: give --dsn"},
		{[]string{"--dsn", "root@tcp(127.0.0.1:3306)/", "stats"}, "names no database"},
		{[]string{"--dsn", "root@tcp(127.0.0.1:3306", "stats"}, "not a MySQL DSN"},
		{[]string{"schema", "print", "--dialect", "oracle"}, "--dialect must be sqlite, mysql or postgres"},
		{[]string{"--dsn", path, "schema", "print", "--dialect", "mysql"}, "contradicts --dsn"},
	} {
		line := fails(t, exitUsage, tc.args...)
		if !strings.Contains(line, tc.want) {
			t.Errorf("outboxctl %q: error %q does not say %q", tc.args, line, tc.want)
		}
		if !strings.Contains(line, "--help'") {
			t.Errorf("outboxctl %q: error %q gives no --help hint", tc.args, line)
		}
	}
	// Bad usage changed nothing.
	wantCounts(t, store, 2, 3, 1, 5)
}

// A password that is a letter of the message's words, or one of its words,
// does not garble the words outboxctl adds (the command, the --help hint);
// a one-letter one is masked only where it stands alone.
func TestShortPasswordDoesNotGarbleMessages(t *testing.T) {
	line := fails(t, exitUsage, "schema", "print", "--dsn", "u:p@tcp(h:3306)/db", "--dialect", "postgres")
	want := "outboxctl: schema print: --dialect postgres contradicts --dsn, which is mysql (see 'outboxctl schema print --help')"
	if line != want {
		t.Errorf("password p: %q\nwant %q", line, want)
	}
	line = fails(t, exitUsage, "schema", "print", "--dsn", "u:help@tcp(h:3306)/db", "--dialect", "postgres")
	if !strings.HasSuffix(line, "(see 'outboxctl schema print --help')") {
		t.Errorf("password help: %q: the hint is garbled", line)
	}
}

// A MySQL server that does not answer fails quickly, within --timeout,
// with one line that never shows the password.
func TestUnreachableMySQL(t *testing.T) {
	for _, dsn := range []string{
		"root:s3cr3t-pw@tcp(127.0.0.1:1)/x",
		"mysql://root:s3cr3t-pw@tcp(127.0.0.1:1)/x?parseTime=true",
	} {
		start := time.Now()
		line := fails(t, exitFailed, "--dsn", dsn, "--timeout", "3s", "stats")
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("took %v with --timeout 3s", elapsed)
		}
		if !strings.HasPrefix(line, "outboxctl: cannot reach database: ") {
			t.Errorf("error %q does not say the database cannot be reached", line)
		}
		if strings.Contains(line, "s3cr3t") {
			t.Errorf("error %q shows the password", line)
		}
	}
	// A server that accepts connections but never answers: --timeout ends
	// the wait.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	line := fails(t, exitFailed, "--dsn", "root:s3cr3t-pw@tcp("+ln.Addr().String()+")/x", "--timeout", "300ms", "stats")
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("a silent server held outboxctl for %v with --timeout 300ms", elapsed)
	}
	if !strings.HasPrefix(line, "outboxctl: cannot reach database: ") || strings.Contains(line, "s3cr3t") {
		t.Errorf("silent server: %q", line)
	}
	t.Logf("silent server: %s", line)

	// The password stays hidden in --help too, where $OUTBOX_DSN is the
	// default of --dsn.
	t.Setenv(envDSN, "app:s3cr3t-pw@tcp(db:3306)/shop")
	for _, args := range [][]string{{"--help"}, {"stats", "--help"}} {
		out := ok(t, args...)
		if strings.Contains(out, "s3cr3t") || !strings.Contains(out, "app:***@tcp(db:3306)/shop") {
			t.Errorf("outboxctl %q shows the password or not the masked DSN:\n%s", args, out)
		}
	}
}

// A DSN of a database outboxctl cannot open (SQL Server) is a usage
// error naming the supported databases, not a missing SQLite file, and it
// never shows the password.
func TestUnsupportedDatabaseDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct{ dsn, want string }{
		{"pgx://app:s3cr3t@localhost/shop", "PostgreSQL under the scheme pgx:// (write postgres://) is not supported (yet)"},
		{"sqlserver://app:s3cr3t@localhost/shop", "SQL Server is not supported (yet)"},
	} {
		for _, args := range [][]string{{"stats"}, {"schema", "apply"}, {"schema", "print"}} {
			line := fails(t, exitUsage, append([]string{"--dsn", tc.dsn}, args...)...)
			if !strings.Contains(line, tc.want) || !strings.Contains(line, "SQLite") || !strings.Contains(line, "MySQL/MariaDB") || !strings.Contains(line, "PostgreSQL (postgres://") {
				t.Errorf("%q %q: error %q does not say %q and name the supported databases", tc.dsn, args, line, tc.want)
			}
			if strings.Contains(line, "s3cr3t") || strings.Contains(line, "does not exist") {
				t.Errorf("%q %q: error %q shows the password or speaks of a SQLite file", tc.dsn, args, line)
			}
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("files created: %v (%v)", entries, err)
	}
}

// A JDBC URL or a libpq key=value string is a usage error naming the
// forms --dsn takes, never a SQLite file: no command creates one or shows
// the password, in table or JSON mode.
func TestForeignDSNForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct{ dsn, want string }{
		{"jdbc:postgresql://db:5432/shop?user=app&password=hunter2", "JDBC URLs (jdbc:…) are not supported"},
		{"JDBC:mysql://app:hunter2@db:3306/shop", "JDBC URLs (jdbc:…) are not supported"},
		{"host=127.0.0.1 user=postgres password=hunter2 dbname=test", "key=value connection strings are not supported"},
		{"  user=postgres password='hunter2' host=db", "key=value connection strings are not supported"},
		// Whatever libpq keyword comes first, in any case.
		{"keepalives=1 host=127.0.0.1 user=postgres password=hunter2 dbname=test", "key=value connection strings are not supported"},
		{"fallback_application_name=ops host=db password=hunter2", "key=value connection strings are not supported"},
		{"load_balance_hosts = random host=db1,db2 password=hunter2", "key=value connection strings are not supported"},
		{"Host=127.0.0.1 User=postgres Password=hunter2", "key=value connection strings are not supported"},
		{"SSLMODE=disable host=db password=hunter2", "key=value connection strings are not supported"},
	} {
		for _, args := range [][]string{
			{"stats"}, {"--json", "stats"}, {"schema", "apply"}, {"--json", "schema", "apply"}, {"schema", "print"},
			{"dead", "list"}, {"--json", "dead", "replay", "--all"},
		} {
			line := fails(t, exitUsage, append([]string{"--dsn", tc.dsn}, args...)...)
			if !strings.Contains(line, tc.want) || !strings.Contains(line, "postgres://user:pass@host:5432/db") || !strings.Contains(line, "tcp(host:3306)") {
				t.Errorf("%q %q: error %q does not say %q and name the accepted forms", tc.dsn, args, line, tc.want)
			}
			if strings.Contains(line, "hunter2") {
				t.Errorf("%q %q: error %q shows the password", tc.dsn, args, line)
			}
		}
		if line := fails(t, exitUsage, "serve", "--db", "eu="+tc.dsn); !strings.Contains(line, tc.want) || strings.Contains(line, "hunter2") {
			t.Errorf("serve --db %q: error %q", tc.dsn, line)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("files created: %v (%v)", entries, err)
	}
}

// Whatever reaches the SQLite driver, a password in it is never shown:
// a file: URI's password parameter, a path holding password=, a DSN of
// some other database taken for a path.
func TestSQLitePathPasswordMasked(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, dsn := range []string{"./password=hunter2.db", "my:sql://app:hunter2@db", "file:missing.db?_auth_pass=hunter2"} {
		for _, args := range [][]string{{"stats"}, {"--json", "stats"}} {
			r := cli(t, append([]string{"--dsn", dsn}, args...)...)
			if r.code != exitFailed || strings.Contains(r.stderr+r.stdout, "hunter2") || !strings.Contains(r.stderr, "does not exist") {
				t.Errorf("%q %q: exit %d, stdout %q, stderr %q; want exit 1 saying the file does not exist, without the password", dsn, args, r.code, r.stdout, r.stderr)
			}
		}
	}
	// An existing database named with a password parameter: the name
	// shown is masked.
	uri := "file:" + filepath.Join(dir, "auth.db") + "?_auth_pass=hunter2"
	for _, args := range [][]string{{"schema", "apply"}, {"--json", "schema", "apply"}, {"stats"}, {"--json", "stats"}} {
		out := ok(t, append([]string{"--dsn", uri}, args...)...)
		if strings.Contains(out, "hunter2") || !strings.Contains(out, "_auth_pass=***") {
			t.Errorf("%q: output shows the password or not the masked name:\n%s", args, out)
		}
	}
}

// A bad value of a SQLite URI parameter is bad usage (exit 2), as a bad
// parameter of a MySQL DSN or a PostgreSQL URL is.
func TestBadSQLiteParameterIsUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	ok(t, "--dsn", path, "schema", "apply")
	line := fails(t, exitUsage, "--dsn", "file:"+path+"?_busy_timeout=abc", "stats")
	if !strings.Contains(line, "--dsn") || !strings.Contains(line, "_busy_timeout") {
		t.Errorf("error %q does not name --dsn and the parameter", line)
	}
	// _auth without its user: a bad parameter too.
	line = fails(t, exitUsage, "--dsn", "file:"+path+"?_auth_pass=x&_auth=1", "stats")
	if !strings.Contains(line, "--dsn") || !strings.Contains(line, "_auth_user") || strings.Contains(line, "_auth_pass=x") {
		t.Errorf("error %q does not name --dsn and the parameter, or shows the password", line)
	}
}

// A SQLite path that does not exist is refused (exit 1) and not created,
// except by schema apply.
func TestMissingSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	for _, args := range [][]string{
		{"stats"}, {"dead", "list"}, {"dead", "show", "x"}, {"dead", "replay", "--all"}, {"purge", "--done-older-than", "1h"},
	} {
		line := fails(t, exitFailed, append([]string{"--dsn", path}, args...)...)
		if !strings.Contains(line, "cannot reach database: SQLite file") || !strings.Contains(line, "does not exist") {
			t.Errorf("%q: error %q does not say the file is missing", args, line)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%q created %s (stat: %v)", args, path, err)
		}
	}
	// A MySQL DSN without its network is not taken for a file silently,
	// and its password is not shown.
	line := fails(t, exitFailed, "--dsn", "app:s3cr3t-pw@localhost/shop", "stats")
	if strings.Contains(line, "s3cr3t") || !strings.Contains(line, "tcp(host:3306)") {
		t.Errorf("error %q shows the password or gives no hint", line)
	}

	out := ok(t, "--dsn", path, "schema", "apply")
	matches(t, out, `^schema applied: table outbox_event on sqlite `)
	out = ok(t, "--dsn", path, "--json", "stats")
	var st statsJSON
	decodeJSON(t, out, &st)
	if st.Total != 0 || st.OldestPending != nil {
		t.Errorf("fresh database: %+v", st)
	}
	// Applying again is harmless; a missing table gets a hint.
	ok(t, "--dsn", path, "schema", "apply")
	line = fails(t, exitFailed, "--dsn", path, "--table", "other_outbox", "stats")
	if !strings.Contains(line, "no such table") || !strings.Contains(line, "schema apply") {
		t.Errorf("missing table: error %q gives no hint", line)
	}
}

// $OUTBOX_DSN is the default of --dsn, and global flags work after the
// command too.
func TestEnvAndFlagPlacement(t *testing.T) {
	path, _ := sqliteDB(t)
	t.Setenv(envDSN, path)
	a := ok(t, "stats", "--json")
	b := ok(t, "--json", "stats")
	t.Setenv(envDSN, "")
	c := ok(t, "stats", "--json", "--dsn", path)
	d := ok(t, "--dsn", path, "stats", "--json", "--table", jdbcstore.DefaultTable, "--timeout", "30s")
	var sa, sb, sc, sd statsJSON
	decodeJSON(t, a, &sa)
	decodeJSON(t, b, &sb)
	decodeJSON(t, c, &sc)
	decodeJSON(t, d, &sd)
	for _, s := range []statsJSON{sb, sc, sd} {
		if s.Counts != sa.Counts || s.Database != path {
			t.Errorf("%+v differs from %+v", s, sa)
		}
	}
	// Flags after a positional argument, and "--".
	ok(t, "--dsn", path, "dead", "show", "x-1", "--json")
	ok(t, "--dsn", path, "dead", "show", "--json", "--", "x-1")
}

// On SQLite a write waiting for another connection's write lock sleeps in
// SQLite's busy handler, which no context interrupts: --timeout bounds
// it all the same (the busy timeout is cut to what is left), where it
// took sqlite.Open's 10 s.
func TestTimeoutBoundsASQLiteWriteLockWait(t *testing.T) {
	path, _ := sqliteDB(t)
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	holder, err := db.Begin() // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback() //nolint:errcheck
	for _, tc := range []struct {
		args []string
		want string // the count of a run cut short, 0 included
	}{
		{[]string{"purge", "--done-older-than", "1h"}, "(0 DONE and 0 DEAD events were removed before the failure; the batch under way, up to 500 more, may have been removed too)"},
		{[]string{"dead", "replay", "--all"}, "(0 events were replayed before the failure)"},
		{[]string{"dead", "discard", "--all"}, "(0 events were discarded before the failure)"},
	} {
		start := time.Now()
		line := fails(t, exitFailed, append([]string{"--dsn", path, "--timeout", "1s"}, tc.args...)...)
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("%v with --timeout 1s took %v behind a held write lock (%s)", tc.args, elapsed, line)
		}
		if !strings.Contains(line, tc.want) || !strings.Contains(line, "ran out") {
			t.Errorf("%v cut short by --timeout said %q, want the count %q and the timeout", tc.args, line, tc.want)
		}
	}
}

func TestSQLiteBusyTimeout(t *testing.T) {
	for _, tc := range []struct {
		source string
		left   time.Duration
		want   string
	}{
		{"app.db", 20 * time.Second, "app.db"},
		{"app.db", 2 * time.Second, "file:app.db?_busy_timeout=2000"},
		{"/a b/x?y#z.db", time.Second, "file:///a%20b/x%3Fy%23z.db?_busy_timeout=1000"},
		{"//tmp/a.db", time.Second, "file:////tmp/a.db?_busy_timeout=1000"}, // not the authority "tmp"
		{"file:app.db?mode=rw", 300 * time.Millisecond, "file:app.db?mode=rw&_busy_timeout=300"},
		{"file:app.db?_busy_timeout=50", time.Second, "file:app.db?_busy_timeout=50"},
		{"app.db", -time.Second, "file:app.db?_busy_timeout=1"},
	} {
		if got := sqliteBusyTimeout(tc.source, tc.left); got != tc.want {
			t.Errorf("sqliteBusyTimeout(%q, %v) = %q, want %q", tc.source, tc.left, got, tc.want)
		}
	}
}

// A SQLite path beginning with // (as /tmp/a.db is on POSIX) opens under
// the default --timeout: it became the URI file://tmp/a.db, whose
// authority "tmp" SQLite refused ("invalid uri authority").
func TestSQLitePathWithTwoLeadingSlashes(t *testing.T) {
	path, _ := sqliteDB(t)
	if !filepath.IsAbs(path) {
		t.Skipf("temp path %q is not absolute", path)
	}
	ok(t, "--dsn", "/"+path, "stats")
}
