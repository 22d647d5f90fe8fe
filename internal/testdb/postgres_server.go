package testdb

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// PostgresHowToServer says what to install so that [StartPostgres] can run.
const PostgresHowToServer = "apt-get install postgresql (initdb and postgres in /usr/lib/postgresql/<version>/bin or on the PATH)"

// Timeouts of a private PostgreSQL server's life cycle, generous for a
// loaded box.
const (
	postgresInitTimeout  = 2 * time.Minute // initdb
	postgresReadyTimeout = time.Minute     // from exec to the first successful ping
	postgresStopTimeout  = time.Minute     // from the signal to exit, then SIGKILL
)

// postgresBaseArgs keep a private server small and quick; the caller's
// settings come after them and win. fsync is off: the tests kill the
// server, never the machine, so the page cache keeps what was written.
var postgresBaseArgs = []string{
	"-c", "shared_buffers=16MB",
	"-c", "max_connections=100",
	"-c", "fsync=off",
	"-c", "full_page_writes=off",
	"-c", "logging_collector=off",
	"-c", "log_min_messages=warning",
}

// PostgresServer is a private PostgreSQL server a test started with
// [StartPostgres]: its own data directory in a temporary directory, its
// own port on 127.0.0.1, the superuser postgres with trust
// authentication and a database named test. Nothing else talks to it, so
// a test may stop, kill and restart it at will (the shared server of
// OUTBOX_TEST_POSTGRES_DSN must never be stopped). Its methods fail the
// test that started it and must be called from that test's goroutine.
type PostgresServer struct {
	t      testing.TB
	server string // the postgres binary
	dir    string // data, socket, log
	port   int
	args   []string
	cred   *osUser       // the postgres OS user when running as root
	log    *bytes.Buffer // the server's output; guarded by mu

	*serverProc // Running, Stop, Kill, Start
}

// StartPostgres starts a private PostgreSQL server for t with the server
// settings opts (name=value, e.g. "lock_timeout=1s") added to a small
// default configuration, waits until it answers and stops it when t ends
// and removes its files. Without the PostgreSQL binaries (or off Linux)
// the test is skipped with a message saying what to install, or fails
// when [InCI].
//
// initdb refuses to run as root: when the test runs as root, the server
// runs as the OS user postgres, which owns the temporary directory.
// Creating the cluster takes about a second and starting the server
// well under one on an idle machine.
func StartPostgres(t testing.TB, opts ...string) *PostgresServer {
	t.Helper()
	initdb, server := postgresBinaries()
	if initdb == "" || server == "" {
		if InCI() {
			t.Fatalf("CI=true but the PostgreSQL server binaries are missing (initdb %q, postgres %q): %s", initdb, server, PostgresHowToServer)
		}
		t.Skipf("private PostgreSQL server tests skipped: initdb or postgres not found; install them with %s", PostgresHowToServer)
	}
	cred, err := postgresCredential()
	if err != nil {
		if InCI() {
			t.Fatalf("CI=true but a private PostgreSQL server cannot run: %v", err)
		}
		t.Skipf("private PostgreSQL server tests skipped: %v", err)
	}
	dir, err := os.MkdirTemp("/tmp", "pg")
	if err != nil {
		t.Fatalf("private PostgreSQL: %v", err)
	}
	if cred != nil {
		if err := os.Chown(dir, cred.uid, cred.gid); err != nil {
			t.Fatalf("private PostgreSQL: give %s to the postgres user: %v", dir, err)
		}
	}
	p := &PostgresServer{t: t, server: server, dir: dir, cred: cred}
	p.serverProc = &serverProc{t: t, name: "PostgreSQL", stopSignal: syscall.SIGINT, group: true,
		readyTimeout: postgresReadyTimeout, stopTimeout: postgresStopTimeout,
		addr: p.Addr, logTail: p.logTail, start: p.start}
	t.Cleanup(func() {
		p.halt(syscall.SIGINT)
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("private PostgreSQL: files kept in %s; its log ends with:\n%s", dir, p.logTail())
		}
	})
	start := time.Now()
	p.initdb(initdb)
	created := time.Now()
	for attempt := 1; ; attempt++ {
		p.port = freePort(t)
		p.args = append([]string{"-D", p.dataDir(), "-p", strconv.Itoa(p.port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1"}, postgresBaseArgs...)
		for _, o := range opts {
			p.args = append(p.args, "-c", o)
		}
		err := p.start()
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(p.logTail(), "already in use") {
			t.Fatalf("private PostgreSQL: %v\nlog:\n%s", err, p.logTail())
		}
	}
	p.exec("CREATE DATABASE test")
	t.Logf("private PostgreSQL on %s (%s): cluster created in %v, server ready in %v",
		p.Addr(), dir, created.Sub(start).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	return p
}

// Addr is the server's TCP address, 127.0.0.1:port; it stays the same
// across Stop and Start.
func (p *PostgresServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// DSN is a pgx URL for the superuser postgres on the database test:
// postgres://postgres@127.0.0.1:port/test?sslmode=disable.
func (p *PostgresServer) DSN() string {
	return "postgres://postgres@" + p.Addr() + "/test?sslmode=disable"
}

// Open opens a pool on the database test (see [OpenPostgres]), closed
// when the test ends.
func (p *PostgresServer) Open() *sqlx.DB {
	p.t.Helper()
	return OpenPostgres(p.t, p.DSN())
}

func (p *PostgresServer) dataDir() string { return filepath.Join(p.dir, "data") }

// initdb creates the cluster: superuser postgres, trust authentication,
// UTF8.
func (p *PostgresServer) initdb(initdb string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), postgresInitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, initdb, "-D", p.dataDir(), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	cmd.SysProcAttr = postgresSysProcAttr(p.cred, false)
	cmd.Dir = p.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("private PostgreSQL: %s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// start runs the server and waits until it answers a ping, or fails if
// the process exits or does not answer in time.
func (p *PostgresServer) start() error {
	cmd := exec.Command(p.server, p.args...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{mu: &p.mu, w: out}, &lockedWriter{mu: &p.mu, w: out}
	cmd.Dir = p.dir
	cmd.SysProcAttr = postgresSysProcAttr(p.cred, true)
	p.mu.Lock()
	p.log = out
	p.mu.Unlock()
	db, err := sqlx.Open("pgx", "postgres://postgres@"+p.Addr()+"/postgres?sslmode=disable&connect_timeout=2")
	if err != nil {
		return err
	}
	defer db.Close()
	return p.launch(cmd, db.PingContext)
}

// exec runs an administrative statement as postgres on the database
// postgres.
func (p *PostgresServer) exec(query string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	db, err := sqlx.Open("pgx", "postgres://postgres@"+p.Addr()+"/postgres?sslmode=disable")
	if err != nil {
		p.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, query); err != nil {
		p.t.Fatalf("private PostgreSQL: %s: %v", query, err)
	}
}

// logTail returns the last lines of the server's output.
func (p *PostgresServer) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(p.log.String(), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// lockedWriter serializes the server's stdout and stderr into one buffer
// that logTail reads.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// postgresBinaries finds initdb and postgres: in the newest
// /usr/lib/postgresql/<version>/bin (Debian), else on the PATH.
func postgresBinaries() (initdb, server string) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		a, b := filepath.Join(dirs[i], "initdb"), filepath.Join(dirs[i], "postgres")
		if isExecutable(a) && isExecutable(b) {
			return a, b
		}
	}
	a, _ := exec.LookPath("initdb")
	b, _ := exec.LookPath("postgres")
	return a, b
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
