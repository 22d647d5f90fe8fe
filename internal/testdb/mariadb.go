package testdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// MariaDBHowTo says what to install so that [StartMariaDB] can run.
const MariaDBHowTo = "apt-get install mariadb-server (mariadbd and mariadb-install-db on the PATH or in /usr/sbin, /usr/bin)"

// Timeouts of a private server's life cycle, generous for a loaded box.
const (
	mariaDBInstallTimeout = 2 * time.Minute // mariadb-install-db
	mariaDBReadyTimeout   = time.Minute     // from exec to the first successful ping
	mariaDBStopTimeout    = time.Minute     // from SIGTERM to exit, then SIGKILL
)

// mariaDBBaseArgs keep a private server small and quick to start; the
// caller's options come after them and win.
var mariaDBBaseArgs = []string{
	"--innodb-buffer-pool-size=16M",
	"--innodb-log-file-size=4M",
	"--innodb-use-native-aio=OFF", // no io_setup slots needed per instance
	"--skip-log-bin",
	"--performance-schema=OFF",
	"--character-set-server=utf8mb4", // as the Debian server configuration
	"--collation-server=utf8mb4_general_ci",
	"--max-connections=200",
}

// MariaDB is a private MariaDB server a test started with [StartMariaDB]:
// its own data directory, unix socket and TCP port on 127.0.0.1, an
// account root without password and a database named test. Nothing else
// talks to it, so a test may stop, kill and restart it at will (the shared
// server of OUTBOX_TEST_MYSQL_DSN must never be stopped). Its methods fail
// the test that started it and must be called from that test's goroutine.
type MariaDB struct {
	t       testing.TB
	mariadb string // the server binary
	dir     string // data, socket, pid file, logs
	port    int
	args    []string // the server's full command line after the binary

	*serverProc // Running, Stop, Kill, Start
}

// StartMariaDB starts a private MariaDB server for t with the server
// options opts (e.g. "--innodb-rollback-on-timeout=ON",
// "--innodb-lock-wait-timeout=1") added to a small default configuration,
// waits until it answers and stops it when t ends (SIGTERM, then SIGKILL
// if it has not exited within a minute) and removes its files. Options
// that only take effect when the data directory is created (page size,
// ...) are not supported. Without the MariaDB binaries the test is
// skipped with a message saying what to install, or fails when [InCI].
//
// Creating the data directory takes 1–2 s and starting the server well
// under one on an idle machine.
func StartMariaDB(t testing.TB, opts ...string) *MariaDB {
	t.Helper()
	mariadbd, install := mariaDBBinaries()
	if mariadbd == "" || install == "" {
		if InCI() {
			t.Fatalf("CI=true but the MariaDB server binaries are missing (mariadbd %q, mariadb-install-db %q): %s", mariadbd, install, MariaDBHowTo)
		}
		t.Skipf("private MariaDB server tests skipped: mariadbd or mariadb-install-db not found; install them with %s", MariaDBHowTo)
	}
	dir, err := shortTempDir()
	if err != nil {
		t.Fatalf("private MariaDB: %v", err)
	}
	m := &MariaDB{t: t, mariadb: mariadbd, dir: dir}
	m.serverProc = &serverProc{t: t, name: "MariaDB", stopSignal: syscall.SIGTERM,
		readyTimeout: mariaDBReadyTimeout, stopTimeout: mariaDBStopTimeout,
		addr: m.Addr, logTail: m.errorLogTail, start: m.start}
	t.Cleanup(func() {
		m.halt(syscall.SIGTERM)
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("private MariaDB: files kept in %s; its error log ends with:\n%s", dir, m.errorLogTail())
		}
	})
	start := time.Now()
	m.install(install)
	installed := time.Now()
	// The free port may be taken by someone else before the server binds
	// it: try another one.
	for attempt := 1; ; attempt++ {
		m.port = freePort(t)
		m.args = m.serverArgs(opts)
		err := m.start()
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(m.errorLogTail(), "Address already in use") {
			t.Fatalf("private MariaDB: %v\nerror log:\n%s", err, m.errorLogTail())
		}
	}
	m.exec("CREATE DATABASE IF NOT EXISTS test CHARACTER SET utf8mb4")
	t.Logf("private MariaDB on %s (%s): data directory created in %v, server ready in %v",
		m.Addr(), dir, installed.Sub(start).Round(time.Millisecond), time.Since(installed).Round(time.Millisecond))
	return m
}

// Addr is the server's TCP address, 127.0.0.1:port; it stays the same
// across Stop and Start.
func (m *MariaDB) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)) }

// Config returns go-sql-driver/mysql settings for root on the database
// test with parseTime=true, a new value on each call.
func (m *MariaDB) Config() *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = m.Addr()
	cfg.DBName = "test"
	cfg.ParseTime = true
	return cfg
}

// DSN is [MariaDB.Config] as a DSN: root@tcp(127.0.0.1:port)/test?parseTime=true.
func (m *MariaDB) DSN() string { return m.Config().FormatDSN() }

// Open opens a pool on the database test (see [OpenMySQL]), closed when
// the test ends.
func (m *MariaDB) Open() *sqlx.DB {
	m.t.Helper()
	return OpenMySQL(m.t, m.Config())
}

// install creates the data directory with mariadb-install-db.
func (m *MariaDB) install(install string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mariaDBInstallTimeout)
	defer cancel()
	// The bootstrap's temporary tables go to the server's own directory:
	// in a /tmp shared with other bootstraps they were seen to vanish.
	args := append([]string{"--no-defaults", "--datadir=" + m.dataDir(), "--tmpdir=" + m.dir,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, userArgs()...)
	args = append(args, mariaDBBaseArgs...)
	out, err := exec.CommandContext(ctx, install, args...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("private MariaDB: %s %s: %v\n%s", install, strings.Join(args, " "), err, out)
	}
}

// serverArgs is the server's command line for the current port.
func (m *MariaDB) serverArgs(opts []string) []string {
	args := append([]string{"--no-defaults"}, userArgs()...)
	args = append(args,
		"--datadir="+m.dataDir(),
		"--socket="+filepath.Join(m.dir, "sock"),
		"--port="+strconv.Itoa(m.port),
		"--bind-address=127.0.0.1",
		"--pid-file="+filepath.Join(m.dir, "mariadbd.pid"),
		"--log-error="+m.errorLog(),
		"--tmpdir="+m.dir,
	)
	args = append(args, mariaDBBaseArgs...)
	return append(args, opts...)
}

// start runs the server and waits until it answers a ping, or fails if
// the process exits or does not answer in time.
func (m *MariaDB) start() error {
	cmd := exec.Command(m.mariadb, m.args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = sysProcAttr()
	cfg := m.Config()
	cfg.DBName = ""
	cfg.Timeout = 2 * time.Second
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	if err := m.launch(cmd, db.PingContext); err != nil {
		return fmt.Errorf("%w: %s", err, out.String())
	}
	return nil
}

// exec runs an administrative statement as root on the server.
func (m *MariaDB) exec(query string) {
	m.t.Helper()
	cfg := m.Config()
	cfg.DBName = ""
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	db := openAdmin(ctx, m.t, cfg)
	defer db.Close()
	if _, err := db.ExecContext(ctx, query); err != nil {
		m.t.Fatalf("private MariaDB: %s: %v", query, err)
	}
}

func (m *MariaDB) dataDir() string  { return filepath.Join(m.dir, "data") }
func (m *MariaDB) errorLog() string { return filepath.Join(m.dir, "error.log") }

// errorLogTail returns the last lines of the server's error log.
func (m *MariaDB) errorLogTail() string {
	b, err := os.ReadFile(m.errorLog())
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// Where the server binary and mariadb-install-db are looked for: names on
// the PATH or absolute paths (Debian puts mariadbd in /usr/sbin).
var (
	mariaDBServerNames  = []string{"mariadbd", "/usr/sbin/mariadbd", "/usr/local/sbin/mariadbd"}
	mariaDBInstallNames = []string{"mariadb-install-db", "/usr/bin/mariadb-install-db", "mysql_install_db", "/usr/bin/mysql_install_db"}
)

// mariaDBBinaries finds the server and mariadb-install-db ("" if absent).
func mariaDBBinaries() (server, install string) {
	find := func(names ...string) string {
		for _, n := range names {
			if filepath.IsAbs(n) {
				if fi, err := os.Stat(n); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
					return n
				}
				continue
			}
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
		}
		return ""
	}
	return find(mariaDBServerNames...), find(mariaDBInstallNames...)
}

// userArgs is --user=<name> when running as root: mariadbd refuses to run
// as root without it.
func userArgs() []string {
	if os.Geteuid() != 0 {
		return nil
	}
	name := "root"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return []string{"--user=" + name}
}

// maxSocketDir keeps dir/sock within the unix socket path limit (108
// bytes on Linux, 104 on BSDs).
const maxSocketDir = 90

// shortTempDir makes a directory for a server whose socket path fits the
// limit: in os.TempDir, or in /tmp if that path is too long.
func shortTempDir() (string, error) {
	dir, err := os.MkdirTemp("", "mariadb")
	if err != nil {
		return "", err
	}
	if len(dir) <= maxSocketDir {
		return dir, nil
	}
	_ = os.Remove(dir)
	dir, err = os.MkdirTemp("/tmp", "mariadb")
	if err != nil {
		return "", err
	}
	if len(dir) > maxSocketDir {
		_ = os.Remove(dir)
		return "", errors.New("no temporary directory with a path short enough for a unix socket")
	}
	return dir, nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("private MariaDB: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
