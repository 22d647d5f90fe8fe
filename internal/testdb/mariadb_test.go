package testdb

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Options reach the server: with innodb_rollback_on_timeout a lock wait
// timeout rolls the whole transaction back, not only the statement.
func TestMariaDBServerOptions(t *testing.T) {
	t.Parallel()
	m := StartMariaDB(t, "--innodb-rollback-on-timeout=ON", "--innodb-lock-wait-timeout=1")
	db := m.Open()
	ctx := context.Background()
	var rollback, wait int
	if err := db.QueryRowContext(ctx, "SELECT @@innodb_rollback_on_timeout, @@innodb_lock_wait_timeout").Scan(&rollback, &wait); err != nil {
		t.Fatal(err)
	}
	if rollback != 1 || wait != 1 {
		t.Fatalf("innodb_rollback_on_timeout = %d, innodb_lock_wait_timeout = %d; want 1, 1", rollback, wait)
	}
	if !strings.HasPrefix(m.DSN(), "root@tcp("+m.Addr()+")/test?") || !strings.Contains(m.DSN(), "parseTime=true") {
		t.Errorf("DSN() = %q", m.DSN())
	}
	var charset, version string
	if err := db.QueryRowContext(ctx, "SELECT @@character_set_database, VERSION()").Scan(&charset, &version); err != nil || charset != "utf8mb4" {
		t.Errorf("database test: character set %q, %v; want utf8mb4", charset, err)
	}
	t.Logf("MariaDB %s on %s", version, m.Addr())

	// The timed-out transaction is rolled back entirely: its first insert too.
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	waiter, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Rollback()
	if _, err := waiter.ExecContext(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	_, err = waiter.ExecContext(ctx, "INSERT INTO t VALUES (1)") // waits for holder's row lock
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 {
		t.Fatalf("insert of a locked key: %v, want error 1205 (lock wait timeout)", err)
	}
	// Without the option the COMMIT would store row 2.
	if err := waiter.Commit(); err != nil {
		t.Fatalf("COMMIT after the timeout: %v", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows, %v; want none: the timed-out transaction's first row must be rolled back", n, err)
	}
}

// Data survives Stop/Start and Kill/Start; the port refuses connections
// while the server is down and is the same afterwards.
func TestMariaDBRestart(t *testing.T) {
	t.Parallel()
	m := StartMariaDB(t)
	db := m.Open()
	ctx := context.Background()
	addr := m.Addr()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for i, down := range []struct {
		name string
		stop func()
	}{{"Stop", m.Stop}, {"Kill", m.Kill}} {
		if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		down.stop()
		stopped := time.Now()
		if m.Running() {
			t.Fatalf("%s: the server still runs", down.name)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("%s: %s still accepts connections", down.name, addr)
		}
		m.Start()
		t.Logf("%s took %v, Start %v", down.name, stopped.Sub(start).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
		if !m.Running() || m.Addr() != addr {
			t.Fatalf("after %s and Start: running %v on %s, want %s", down.name, m.Running(), m.Addr(), addr)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != i+1 {
			t.Fatalf("after %s and Start: %d rows, %v; want %d", down.name, n, err, i+1)
		}
	}
}

// Without the binaries: a skip saying what to install, a failure in CI.
func TestMariaDBMissingBinaries(t *testing.T) {
	server, install := mariaDBServerNames, mariaDBInstallNames
	t.Cleanup(func() { mariaDBServerNames, mariaDBInstallNames = server, install })
	mariaDBServerNames = []string{"outbox-no-such-mariadbd", "/nonexistent/mariadbd"}
	t.Setenv("CI", "")
	r := call(t, func(tb testing.TB) { StartMariaDB(tb) })
	if r.failed != "" || !strings.Contains(r.skipped, "apt-get install mariadb-server") {
		t.Errorf("without CI: skipped %q, failed %q; want a skip naming the package", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	r = call(t, func(tb testing.TB) { StartMariaDB(tb) })
	if r.skipped != "" || !strings.Contains(r.failed, "CI=true") || !strings.Contains(r.failed, "apt-get install mariadb-server") {
		t.Errorf("with CI=true: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}
