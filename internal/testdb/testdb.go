// Package testdb gives tests their own database on a server configured by
// the environment, so packages and parallel subtests never share state.
//
// MySQL/MariaDB: set OUTBOX_TEST_MYSQL_DSN to a go-sql-driver/mysql DSN of
// an account that may CREATE and DROP databases, e.g.
//
//	OUTBOX_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/test?parseTime=true' go test -race ./...
//
// Each call of [MySQL] or [MySQLConfig] creates a database with a unique
// name (outbox_t_…) and drops it when the test ends. Without the variable
// the tests skip, with CI=true they fail instead: CI must never pass by
// skipping. An unreachable server always fails the test.
//
// The shared server must never be stopped, restarted or reconfigured by a
// test: other packages use it at the same time. A test that needs a server
// outage or server options of its own starts a private MariaDB server with
// [StartMariaDB]: its own data directory in a temporary directory, its own
// port on 127.0.0.1, root without password, a database named test, removed
// when the test ends. Server options are passed as arguments:
//
//	m := testdb.StartMariaDB(t, "--innodb-rollback-on-timeout=ON", "--innodb-lock-wait-timeout=1")
//	db := m.Open() // or sqlx.Open("mysql", m.DSN()), or edit m.Config()
//	m.Stop()       // clean shutdown; m.Kill() for a crash
//	m.Start()      // same data directory and port
//
// It needs the MariaDB server binaries (mariadbd, mariadb-install-db;
// apt-get install mariadb-server), not OUTBOX_TEST_MYSQL_DSN; without them
// the test skips, or fails when CI=true. A server costs about 2 s to
// create and well under 1 s to start or restart.
//
// PostgreSQL: set OUTBOX_TEST_POSTGRES_DSN to a pgx DSN of a role that may
// CREATE and DROP schemas, e.g.
//
//	OUTBOX_TEST_POSTGRES_DSN='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// Each call of [Postgres] or [PostgresSchemaDSN] creates a schema with a
// unique name (outbox_t_…) used as the connection's search_path and drops
// it when the test ends; the rules for a missing variable and CI are the
// same. [StartPostgres] starts a private PostgreSQL server (initdb and
// postgres from /usr/lib/postgresql/<version>/bin; as the OS user postgres
// when the tests run as root) with the same Stop, Kill and Start.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	// Tests on a MySQL database get its dialect registered.
	_ "github.com/outbox-go/outbox/jdbcstore/mysql"

	// DSNs may name any location (loc=Asia/Kolkata) on machines without
	// a zoneinfo database.
	_ "time/tzdata"
)

// EnvMySQLDSN is the environment variable holding the MySQL/MariaDB DSN.
const EnvMySQLDSN = "OUTBOX_TEST_MYSQL_DSN"

// MySQLHowTo is the command that enables the MySQL/MariaDB tests.
const MySQLHowTo = EnvMySQLDSN + "='root@tcp(127.0.0.1:3306)/test?parseTime=true' go test -race ./..."

// setupTimeout bounds creating, opening and dropping a test database.
const setupTimeout = 30 * time.Second

// InCI reports whether the CI environment variable is set to a true value
// ("true", "1"): database tests must then run, never skip.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// MySQLDSN returns the DSN in OUTBOX_TEST_MYSQL_DSN. Without it the test
// is skipped with a message saying how to enable it, or fails when InCI.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := strings.TrimSpace(os.Getenv(EnvMySQLDSN))
	if dsn != "" {
		return dsn
	}
	if InCI() {
		t.Fatalf("CI=true but %s is not set: the MySQL/MariaDB tests must run in CI; run them with %s", EnvMySQLDSN, MySQLHowTo)
	}
	t.Skipf("MySQL/MariaDB tests skipped: %s is not set; enable them with %s", EnvMySQLDSN, MySQLHowTo)
	return ""
}

// MySQLConfig creates a new, empty database on the server of
// OUTBOX_TEST_MYSQL_DSN and returns the DSN's settings pointing at it. The
// database is dropped when t ends (after everything t.Cleanup registered
// later, such as closing pools opened on it). Edit a Clone of the result to
// open the same database with other settings (loc, time_zone,
// interpolateParams, ...).
func MySQLConfig(t testing.TB) *mysql.Config {
	t.Helper()
	base, err := mysql.ParseDSN(MySQLDSN(t))
	if err != nil {
		t.Fatalf("%s: %v", EnvMySQLDSN, err)
	}
	name := databaseName(t)
	admin := base.Clone()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	db := openAdmin(ctx, t, admin)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		db, err := sqlx.Open("mysql", admin.FormatDSN())
		if err == nil {
			defer db.Close()
			_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
		}
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	cfg := base.Clone()
	cfg.DBName = name
	return cfg
}

// MySQL returns a pool on a new, empty database (see [MySQLConfig]),
// opened with the settings of OUTBOX_TEST_MYSQL_DSN and closed when t ends.
func MySQL(t testing.TB) *sqlx.DB {
	t.Helper()
	return OpenMySQL(t, MySQLConfig(t))
}

// OpenMySQL opens cfg with the driver "mysql", checks the connection and
// closes the pool when t ends.
func OpenMySQL(t testing.TB, cfg *mysql.Config) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("connect to mysql database %s: %v", cfg.DBName, err)
	}
	return db
}

// openAdmin connects with the configured DSN, failing t (never skipping)
// when the server cannot be reached.
func openAdmin(ctx context.Context, t testing.TB, cfg *mysql.Config) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("%s: %v", EnvMySQLDSN, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		t.Fatalf("cannot reach the MySQL/MariaDB server of %s (%s@%s): %v", EnvMySQLDSN, cfg.User, cfg.Addr, err)
	}
	return db
}

// databaseName returns a unique database name carrying a readable part of
// the test name (its end, where subtest names are):
// outbox_t_<test>_<random>, at most 58 characters (the limit is 64).
func databaseName(t testing.TB) string {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 36 {
		name = name[len(name)-36:]
	}
	name = strings.Trim(name, "_")
	return "outbox_t_" + name + "_" + hex.EncodeToString(rnd[:])
}
