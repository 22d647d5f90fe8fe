package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
)

// startServe runs outboxctl with args (which name serve) in process until the test
// ends; it returns the dashboard's URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr strings.Builder
	exited := make(chan int, 1)
	go func() {
		code := run(ctx, append(args, "--addr", "127.0.0.1:0"), pw, &stderr)
		pw.Close()
		exited <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("serve exited %d after the interrupt: %s", code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop after the interrupt")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed no address (%v); stderr: %s", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`on (http://\S+) \((read-only|mutations enabled)\)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve printed %q", line)
	}
	return m[1]
}

func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestServe(t *testing.T) {
	path, _ := sqliteDB(t)
	// --timeout bounds connecting only (serve is an untimed command).
	base := startServe(t, "--dsn", path, "--timeout", "1s", "serve")
	code, body := getPage(t, base)
	if code != http.StatusOK || !strings.Contains(body, `id="count-DEAD">5<`) || !strings.Contains(body, "read-only") {
		t.Fatalf("GET / = %d\n%s", code, body)
	}
	if code, body := getPage(t, base+"dead?type=Email"); code != http.StatusOK || !strings.Contains(body, ">x-4<") {
		t.Errorf("dead list = %d\n%s", code, body)
	}
	// The replay preview of a full page of the longest ids, of characters
	// the URL escapes to 12 bytes each (~218 KB of query), is served: the
	// server's header limit (64 KiB) refused it.
	q := url.Values{}
	for i := range dashboard.MaxPageSize {
		q.Add("id", fmt.Sprintf("%s%03d", strings.Repeat("\U0001D538", core.MaxEventIDLen-3), i))
	}
	if code, body := getPage(t, base+"replay?"+q.Encode()); code != http.StatusOK {
		t.Errorf("replay preview of %d long ids = %d\n%s", dashboard.MaxPageSize, code, body)
	}
	res, err := http.Post(base+"replay", "application/x-www-form-urlencoded", strings.NewReader("id=x-1&confirm=yes"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("POST on a read-only serve = %d, want 403", res.StatusCode)
	}
}

func TestServeTenantSet(t *testing.T) {
	a, _ := sqliteDB(t)
	b, _ := sqliteDB(t)
	base := startServe(t, "serve", "--db", "eu="+a, "--db", "us="+b)
	if code, body := getPage(t, base+"?db=us"); code != http.StatusOK || !strings.Contains(body, `<option value="us" selected>`) {
		t.Errorf("GET ?db=us = %d\n%s", code, body)
	}
}

func TestServeBadUsage(t *testing.T) {
	path, _ := sqliteDB(t)
	for _, args := range [][]string{
		{"--dsn", path, "serve", "--base-path", "ops"},
		{"--dsn", path, "serve", "--trusted-origin", "nope"},
		{"serve", "--db", "noequals"},
		{"serve", "--db", "a b=" + path},
		{"serve", "--db", "x=file:" + path + "?_busy_timeout=abc"},
		{"--dsn", path, "--json", "serve"},
	} {
		fails(t, exitUsage, args...)
	}
	fails(t, exitFailed, "--dsn", path, "serve", "--addr", "256.0.0.1:1")
	for _, d := range []string{"0", "-1s"} {
		if line := fails(t, exitUsage, "--dsn", path, "serve", "--query-timeout", d); !strings.Contains(line, "--query-timeout must be positive") {
			t.Errorf("--query-timeout %s: %q", d, line)
		}
	}
	// An --addr no machine can listen on is bad usage, found before any
	// database is opened (the missing file is not reported).
	for _, addr := range []string{"bogus", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:nosuchservice"} {
		if line := fails(t, exitUsage, "--dsn", path+".missing", "serve", "--addr", addr); !strings.Contains(line, "--addr") {
			t.Errorf("--addr %s: %q", addr, line)
		}
	}
	// A --db value's DSN errors name that --db, not --dsn.
	line := fails(t, exitUsage, "serve", "--db", "eu=u:pw@tcp(h:1)/db?timeout=zz")
	if !strings.Contains(line, " --db eu: not a MySQL DSN") || strings.Contains(line, "--dsn") {
		t.Errorf("bad MySQL DSN in --db: %q", line)
	}
	if line := fails(t, exitUsage, "serve", "--db", "eu=jdbc:mysql://h/db"); !strings.Contains(line, " --db eu: JDBC URLs") {
		t.Errorf("JDBC URL in --db: %q", line)
	}
	fails(t, exitFailed, "serve", "--db", "x="+path+".missing")
	// --dsn and --db together: --dsn was ignored, a typo in it unseen.
	if line := fails(t, exitUsage, "--dsn", path+".typo", "serve", "--db", "x="+path); !strings.Contains(line, "--dsn and --db exclude each other") {
		t.Errorf("--dsn with --db: %q", line)
	}
}

// A --db value without NAME=, or whose text before the first '=' is no
// name (a DSN with parameters), is bad usage whose error shows the value
// with its password masked; the name is never taken from inside a DSN.
func TestServeDBSpecHidesThePassword(t *testing.T) {
	for _, tc := range []struct{ spec, shown string }{
		{"app:s3cretPW@tcp(127.0.0.1:1)/test", `"app:***@tcp(127.0.0.1:1)/test"`},
		{"app:s3cretPW@tcp(127.0.0.1:1)/test?parseTime=true", `"app:***@tcp(127.0.0.1:1)/test?parseTime=true"`},
		{"mysql://app:s3cretPW@tcp(127.0.0.1:1)/test?parseTime=true", `"mysql://app:***@tcp(127.0.0.1:1)/test?parseTime=true"`},
		{"postgres://app:s3cretPW@127.0.0.1:1/test?sslmode=disable", `"postgres://app:***@127.0.0.1:1/test?sslmode=disable"`},
		{"file:app.db?_auth_pass=s3cretPW", `"file:app.db?_auth_pass=***"`},
		{"sqlserver://app:s3cretPW@127.0.0.1:1/test?encrypt=true", "a value not shown"},
		{"e u=app:s3cretPW@tcp(127.0.0.1:1)/test", `"e u=app:***@tcp(127.0.0.1:1)/test"`},
		{"eu=", `"eu="`},
	} {
		line := fails(t, exitUsage, "--timeout", "2s", "serve", "--db", tc.spec)
		if !strings.Contains(line, "--db: want NAME=DSN, the NAME being 1..64 letters, digits") || !strings.Contains(line, tc.shown) {
			t.Errorf("--db %q: error %q does not say NAME=DSN is wanted and show %s", tc.spec, line, tc.shown)
		}
		if strings.Contains(line, "s3cret") {
			t.Errorf("--db %q: error %q shows the password", tc.spec, line)
		}
	}
	// With its name, a database that cannot be reached is named by it.
	line := fails(t, exitFailed, "--timeout", "2s", "serve", "--db", "eu.1=app:s3cretPW@tcp(127.0.0.1:1)/test?parseTime=true")
	if !strings.HasPrefix(line, "outboxctl: --db eu.1: cannot reach database") || strings.Contains(line, "s3cret") {
		t.Errorf("unreachable --db: %q", line)
	}
}

// serve finds a table as the other commands do: one named by an SQL
// keyword is quoted (its probe said: near "order": syntax error).
func TestServeQuotesTheTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	ok(t, "--dsn", path, "--table", "order", "schema", "apply")
	base := startServe(t, "--dsn", path, "--table", "order", "serve")
	if code, body := getPage(t, base); code != http.StatusOK {
		t.Errorf("GET / = %d\n%s", code, body)
	}
}

func TestServeInbox(t *testing.T) {
	path, store := sqliteDB(t)
	in, err := inbox.New(t.Context(), store.DB(), inbox.Config{Table: "my_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Enqueue(t.Context(), inbox.Message{Source: "s", MessageID: "m-1", Topic: "t", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, "--dsn", path, "serve", "--inbox-table", "my_inbox")
	if code, body := getPage(t, base+"inbox?status=pending"); code != http.StatusOK || !strings.Contains(body, ">m-1<") {
		t.Errorf("GET inbox = %d\n%s", code, body)
	}
	fails(t, exitUsage, "--dsn", path, "serve", "--inbox-table", "bad name")
	// Tables that do not exist fail serve before it listens (it used to
	// start and answer every page with 500).
	fails(t, exitFailed, "--dsn", path, "serve", "--inbox-table", "nope")
	fails(t, exitFailed, "--dsn", path, "--table", "nope", "serve")
	fails(t, exitFailed, "serve", "--db", "a="+path, "--table", "nope")
	// A table that is no inbox table (the outbox's) fails it too: every
	// inbox page answered 500 (no such column: source).
	for _, args := range [][]string{
		{"--dsn", path, "serve", "--inbox-table", jdbcstore.DefaultTable},
		{"serve", "--db", "a=" + path, "--inbox-table", jdbcstore.DefaultTable},
	} {
		if line := fails(t, exitFailed, args...); !strings.Contains(line, "not an inbox table") {
			t.Errorf("%v: %s, want the table refused as no inbox table", args, line)
		}
	}
}

func TestServeAllowedHosts(t *testing.T) {
	for _, c := range []struct {
		addr             string
		origins, allowed []string
		want             []string
	}{
		{"127.0.0.1:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]"}},
		{"localhost:0", nil, nil, []string{"localhost", "127.0.0.1", "[::1]"}},
		{"[::1]:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]"}},
		{"10.1.2.3:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]", "10.1.2.3"}},
		{"[fd00::5]:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]", "[fd00::5]"}},
		{"ops.internal:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]", "ops.internal"}},
		// Every interface: the names it is reached by are not known.
		{":8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]"}},
		{"0.0.0.0:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]"}},
		{"[::]:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]"}},
		{"127.0.0.1:8080", []string{"https://Ops.Example.com", "http://[fd00::7]:8080/"}, []string{"dash.internal:9000", "LOCALHOST"},
			[]string{"localhost", "127.0.0.1", "[::1]", "ops.example.com", "[fd00::7]", "dash.internal:9000"}},
		{"127.0.0.1:8080", []string{"https://ops.example.com"}, []string{"*"}, nil},
	} {
		got, err := allowedHosts(c.addr, c.origins, c.allowed)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("allowedHosts(%q, %q, %q) = %q, %v; want %q", c.addr, c.origins, c.allowed, got, err, c.want)
		}
	}
	if _, err := allowedHosts("127.0.0.1:8080", nil, []string{"*", "ops.internal"}); err == nil {
		t.Error(`--allowed-host "*" with another host: no error`)
	}

	path, _ := sqliteDB(t)
	base := startServe(t, "--dsn", path, "serve", "--allowed-host", "ops.internal")
	port := base[strings.LastIndex(base, ":") : len(base)-1]
	for host, want := range map[string]int{
		"127.0.0.1" + port:        http.StatusOK,
		"localhost" + port:        http.StatusOK,
		"ops.internal" + port:     http.StatusOK,
		"attacker.example" + port: http.StatusMisdirectedRequest,
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"dead", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET with Host %s = %d, want %d", host, res.StatusCode, want)
		}
	}
	fails(t, exitUsage, "--dsn", path, "serve", "--allowed-host", "http://ops.internal")
	fails(t, exitUsage, "--dsn", path, "serve", "--allowed-host", "*", "--allowed-host", "ops.internal")
}

// --query-timeout bounds each page's database work: on PostgreSQL, a page
// whose query waits for a table lock another transaction holds (a
// migration's) answers 504 at the bound; it waited as long as the lock was
// held.
func TestServeQueryTimeoutPostgres(t *testing.T) {
	dsn := testdb.PostgresSchemaDSN(t)
	ok(t, "--dsn", dsn, "schema", "apply")
	base := startServe(t, "--dsn", dsn, "serve", "--query-timeout", "1s")
	db := testdb.OpenPostgres(t, dsn)
	tx, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(t.Context(), "LOCK TABLE "+jdbcstore.DefaultTable+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"dead", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET dead with the table locked: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "not done within the query timeout (1s)") {
		t.Errorf("GET dead with the table locked = %d, want 504\n%s", res.StatusCode, b)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if code, body := getPage(t, base+"dead"); code != http.StatusOK {
		t.Errorf("GET dead once the lock is released = %d\n%s", code, body)
	}
}

// The server writes a page that took up to --query-timeout: its
// WriteTimeout (a minute) cut longer ones.
func TestServeWriteTimeoutOutlastsTheQueryTimeout(t *testing.T) {
	for _, qt := range []time.Duration{time.Second, dashboard.DefaultQueryTimeout, 5 * time.Minute} {
		if srv := newServer(nil, dashboard.Config{QueryTimeout: qt}); srv.WriteTimeout <= qt {
			t.Errorf("--query-timeout %s: the server's WriteTimeout is %s: a page taking that long cannot be written", qt, srv.WriteTimeout)
		}
	}
}
