package testdb

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestPostgresDSNWithoutVariable(t *testing.T) {
	t.Setenv(EnvPostgresDSN, "")
	t.Setenv("CI", "")
	r := call(t, func(tb testing.TB) { PostgresDSN(tb) })
	if r.failed != "" || !strings.Contains(r.skipped, PostgresHowTo) {
		t.Errorf("without the variable: skipped %q, failed %q; want a skip naming %q", r.skipped, r.failed, PostgresHowTo)
	}
	t.Setenv("CI", "true")
	r = call(t, func(tb testing.TB) { PostgresDSN(tb) })
	if r.skipped != "" || !strings.Contains(r.failed, "CI=true") || !strings.Contains(r.failed, PostgresHowTo) {
		t.Errorf("with CI=true: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}

func TestPostgresUnreachableServerFails(t *testing.T) {
	t.Setenv(EnvPostgresDSN, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := call(t, func(tb testing.TB) { PostgresSchemaDSN(tb) })
		if r.skipped != "" || !strings.Contains(r.failed, "cannot reach") {
			t.Errorf("CI=%q: skipped %q, failed %q; want a failure", ci, r.skipped, r.failed)
		}
	}
}

func TestWithPostgresParam(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u@h:5432/db?sslmode=disable": "postgres://u@h:5432/db?search_path=s_1&sslmode=disable",
		"host=h user=u dbname=db":                "host=h user=u dbname=db search_path='s_1'",
	} {
		if got := WithPostgresParam(t, dsn, "search_path", "s_1"); got != want {
			t.Errorf("WithPostgresParam(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// A schema made for a test is the connection's search_path during the
// test and is gone after it.
func TestPostgresSchemaIsDroppedAtCleanup(t *testing.T) {
	PostgresDSN(t)
	var name string
	t.Run("user", func(t *testing.T) {
		db := Postgres(t)
		if err := db.GetContext(t.Context(), &name, "SELECT current_schema()"); err != nil || !strings.HasPrefix(name, "outbox_t_") {
			t.Fatalf("current_schema() = %q, %v", name, err)
		}
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE x (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	})
	if name == "" {
		t.FailNow()
	}
	db := Postgres(t)
	var n int
	if err := db.GetContext(t.Context(), &n, "SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1", name); err != nil || n != 0 {
		t.Errorf("schema %s still exists after its test: %d, %v", name, n, err)
	}
}

// Settings reach the server; data survives Stop/Start and Kill/Start; the
// port refuses connections while the server is down and is the same
// afterwards.
func TestPostgresServerRestart(t *testing.T) {
	t.Parallel()
	p := StartPostgres(t, "lock_timeout=1500ms")
	db := p.Open()
	ctx := context.Background()
	var lockTimeout, version string
	if err := db.QueryRowContext(ctx, "SELECT current_setting('lock_timeout'), version()").Scan(&lockTimeout, &version); err != nil || lockTimeout != "1500ms" {
		t.Fatalf("lock_timeout = %q, %v; want 1500ms", lockTimeout, err)
	}
	t.Logf("%s on %s", version, p.Addr())
	addr := p.Addr()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for i, down := range []struct {
		name string
		stop func()
	}{{"Stop", p.Stop}, {"Kill", p.Kill}} {
		if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		down.stop()
		stopped := time.Now()
		if p.Running() {
			t.Fatalf("%s: the server still runs", down.name)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("%s: %s still accepts connections", down.name, addr)
		}
		p.Start()
		t.Logf("%s took %v, Start %v", down.name, stopped.Sub(start).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
		if !p.Running() || p.Addr() != addr {
			t.Fatalf("after %s and Start: running %v on %s, want %s", down.name, p.Running(), p.Addr(), addr)
		}
		var n int
		// The pool's connections died with the server: the first use
		// may fail once.
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n)
		if err != nil {
			err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n)
		}
		if err != nil || n != i+1 {
			t.Fatalf("after %s and Start: %d rows, %v; want %d", down.name, n, err, i+1)
		}
	}
}

// A database of its own is empty, separate from the base database (its
// tables are not there) and dropped when the test ends.
func TestPostgresDatabaseDSN(t *testing.T) {
	var name string
	t.Run("create", func(t *testing.T) {
		db := OpenPostgres(t, PostgresDatabaseDSN(t))
		if err := db.Get(&name, "SELECT current_database()"); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "outbox_t_") {
			t.Fatalf("current_database() = %q, want a test database", name)
		}
	})
	admin := OpenPostgres(t, PostgresDSN(t))
	var n int
	if err := admin.Get(&n, "SELECT COUNT(*) FROM pg_database WHERE datname = $1", name); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test", name)
	}
	if got := withPostgresDatabase(t, "host=h user=u dbname=test", "x"); got != "host=h user=u dbname=test dbname='x'" {
		t.Errorf("keyword/value DSN: %q", got)
	}
}
