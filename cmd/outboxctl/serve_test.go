package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	s := launchServe(t, "127.0.0.1:0", args...)
	t.Cleanup(func() {
		if code, stderr := s.stop(t); code != 0 {
			t.Errorf("serve exited %d after the interrupt: %s", code, stderr)
		}
	})
	return s.url
}

// served is an outboxctl serve running in process.
type served struct {
	url    string // the dashboard's URL, as serve printed it
	cancel context.CancelFunc
	exited chan int
	stderr *strings.Builder // read once exited
	code   int              // set by stop
}

// launchServe runs outboxctl with args (which name serve) in process,
// listening on addr, and returns once serve printed the dashboard's URL.
// The test ends it with stop; the cleanup stops it otherwise.
func launchServe(t *testing.T, addr string, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &served{cancel: cancel, exited: make(chan int, 1), stderr: &strings.Builder{}, code: -1}
	go func() {
		code := run(ctx, append(args, "--addr", addr), pw, s.stderr)
		pw.Close()
		s.exited <- code
	}()
	t.Cleanup(func() { s.stop(t) })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		s.stop(t)
		t.Fatalf("serve printed no address (%v); stderr: %s", err, s.stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`on (http://\S+) \((read-only|mutations enabled)\)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve printed %q", line)
	}
	s.url = m[1]
	return s
}

// stop interrupts serve, waits for it to exit and returns its exit status
// and what it wrote on stderr. Stopping it again returns the same.
func (s *served) stop(t *testing.T) (int, string) {
	t.Helper()
	s.cancel()
	if s.code < 0 {
		select {
		case s.code = <-s.exited:
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop after the interrupt")
		}
	}
	return s.code, s.stderr.String()
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
		// A link-local address without its zone, as clients send it (it
		// was refused: "AllowedHosts[3] … names an IPv6 zone").
		{"[fe80::1%eth0]:8080", nil, nil, []string{"localhost", "127.0.0.1", "[::1]", "[fe80::1]"}},
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

// The URL serve prints answers, whatever --addr: listening on every
// interface it printed http://[::]:PORT/, which answered 421 (the
// any-interface address is no host the dashboard answers to), and said
// "::" for 0.0.0.0 too. A link-local IPv6 --addr with its zone was refused
// as "AllowedHosts[3] … names an IPv6 zone"; it is answered to without the
// zone, which clients leave out of the Host header.
func TestServePrintedURLAnswers(t *testing.T) {
	path, _ := sqliteDB(t)
	type listen struct{ addr, warning string }
	addrs := []listen{
		{"0.0.0.0:0", "listens on every interface (0.0.0.0:"},
		{":0", "listens on every interface (:"},
		{"localhost:0", ""},
	}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		addrs = append(addrs, listen{"[::]:0", "listens on every interface ([::]:"}, listen{"[::1]:0", ""})
	} else {
		t.Logf("no IPv6 loopback (%v): its cases are left out", err)
	}
	if ll := linkLocal(); ll != "" {
		addrs = append(addrs, listen{net.JoinHostPort(ll, "0"), "listens on fe80:"})
	} else {
		t.Log("no link-local IPv6 address to listen on: its case is left out")
	}
	for _, c := range addrs {
		t.Run(c.addr, func(t *testing.T) {
			s := launchServe(t, c.addr, "--dsn", path, "serve", "--base-path", "/ops/")
			if !strings.HasSuffix(s.url, "/ops/") {
				t.Errorf("serve printed %s, not under --base-path", s.url)
			}
			if code, body := getPage(t, s.url); code != http.StatusOK {
				t.Errorf("GET %s, the URL serve printed = %d\n%s", s.url, code, body)
			}
			code, stderr := s.stop(t)
			if code != 0 {
				t.Errorf("serve exited %d after the interrupt: %s", code, stderr)
			}
			if c.warning != "" && !strings.Contains(stderr, c.warning) {
				t.Errorf("the warning does not say %q:\n%s", c.warning, stderr)
			} else if c.warning == "" && stderr != "" {
				t.Errorf("serve on loopback warned:\n%s", stderr)
			}
		})
	}
}

// linkLocal returns a link-local IPv6 address that can be listened on,
// with its zone (fe80::1%eth0), or "" when the machine has none.
func linkLocal() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.To4() != nil || !n.IP.IsLinkLocalUnicast() {
				continue
			}
			zoned := n.IP.String() + "%" + ifc.Name
			if ln, err := net.Listen("tcp", net.JoinHostPort(zoned, "0")); err == nil {
				ln.Close()
				return zoned
			}
		}
	}
	return ""
}

// A bad --allowed-host, or an --addr whose host the dashboard cannot
// answer to, is bad usage naming that flag and the value given, found
// before connecting (the missing file is not reported). They were named
// as entries of dashboard.Config's AllowedHosts, with an index shifted by
// the hosts serve adds: --allowed-host 'a b' was "AllowedHosts[3]".
func TestServeHostUsageErrorsNameTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.db")
	path, _ := sqliteDB(t)
	for _, c := range []struct {
		args []string
		want []string
		open bool // the database exists: the error is found once it is open
	}{
		{[]string{"--allowed-host", "a b"}, []string{`--allowed-host must be a host such as ops.example.com`, `got "a b"`}, false},
		{[]string{"--addr", "ops.internal:0", "--allowed-host", "ok.internal", "--allowed-host", "http://x", "--allowed-host", "x:0"},
			[]string{`--allowed-host must be a host such as ops.example.com`, `got "http://x"`, `; --allowed-host "x:0": port must be 1..65535`}, false},
		{[]string{"--allowed-host", "fe80::1%eth0"}, []string{`--allowed-host "fe80::1%eth0": names an IPv6 zone`}, false},
		{[]string{"--allowed-host", "127.1"}, []string{`--allowed-host "127.1": a browser reads a name ending in a number`}, false},
		{[]string{"--addr", "-bad.example:0"}, []string{`--addr "-bad.example:0": the dashboard cannot answer to its host: "-bad.example"`}, false},
		// The Config fields set by other flags, which dashboard.New checks
		// (once the database is open), are named by their flags as well.
		{[]string{"--trusted-origin", "nope", "--base-path", "ops"},
			[]string{`--base-path must start and end with '/', got "ops"`, `--trusted-origin must be an origin such as https://ops.example.com`, `got "nope"`}, true},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			dsn := missing
			if c.open {
				dsn = path
			}
			line := fails(t, exitUsage, append([]string{"--dsn", dsn, "serve"}, c.args...)...)
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("%s\nwant it to say %s", line, w)
				}
			}
			if strings.Contains(line, "AllowedHosts") || strings.Contains(line, "TrustedOrigins") || strings.Contains(line, "BasePath") {
				t.Errorf("%s\nnames a dashboard.Config field, not the flag", line)
			}
		})
	}
}

// An interrupt while a request is under way lets it finish for
// serveShutdown, then cuts it: its context is canceled, serve waits for it
// to end and fails (exit status 1) saying how many requests it cut. It
// said "serve: stopping: context deadline exceeded (the --timeout of 10s
// ran out)", though --timeout bounds serve's start only, and returned
// with the request still running.
func TestServeInterruptCutsTheRequestsUnderWay(t *testing.T) {
	entered := make(chan struct{})
	ended := make(chan error, 1)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered) // one request only
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-release:
			ended <- errors.New("released by the test's cleanup")
		}
	})
	pr, pw := io.Pipe()
	var stderr strings.Builder
	g := newGlobals("")
	s := &session{stdout: pw, stderr: &stderr, g: g}
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, s, "127.0.0.1:0", h, dashboard.Config{BasePath: "/", QueryTimeout: dashboard.DefaultQueryTimeout})
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := regexp.MustCompile(`http://\S+`).FindString(line)
	answered := make(chan error, 1)
	go func() {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
		}
		answered <- err
	}()
	t.Cleanup(func() {
		close(release)
		select {
		case <-answered:
		case <-time.After(30 * time.Second):
			t.Error("the request never ended")
		}
	})
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	start := time.Now()
	interrupt()
	select {
	case err = <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after the interrupt")
	}
	if took := time.Since(start); took < serveShutdown {
		t.Errorf("serve returned %v after the interrupt, before the graceful stop's %s", took, serveShutdown)
	}
	var out strings.Builder
	code := report(&out, g, nil, err)
	want := "outboxctl: serve: stopping: the graceful stop's 5s ran out with 1 request still under way: cut (a page's database work may take up to --query-timeout, 30s)\n"
	if code != exitFailed || out.String() != want {
		t.Errorf("serve interrupted with a request under way: exit %d, stderr %q\nwant exit %d, stderr %q", code, out.String(), exitFailed, want)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the request cut ended with %v, want its context canceled", err)
		}
	default:
		t.Error("serve returned with the request it cut still running")
	}
}
