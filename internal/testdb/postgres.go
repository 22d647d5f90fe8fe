package testdb

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	// Tests on a PostgreSQL database get its dialect and the pgx driver
	// registered.
	_ "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// EnvPostgresDSN is the environment variable holding the PostgreSQL DSN.
const EnvPostgresDSN = "OUTBOX_TEST_POSTGRES_DSN"

// PostgresHowTo is the command that enables the PostgreSQL tests.
const PostgresHowTo = EnvPostgresDSN + "='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go test -race ./..."

// PostgresDSN returns the DSN in OUTBOX_TEST_POSTGRES_DSN (a pgx URL or
// keyword/value DSN). Without it the test is skipped with a message saying
// how to enable it, or fails when InCI.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := strings.TrimSpace(os.Getenv(EnvPostgresDSN))
	if dsn != "" {
		return dsn
	}
	if InCI() {
		t.Fatalf("CI=true but %s is not set: the PostgreSQL tests must run in CI; run them with %s", EnvPostgresDSN, PostgresHowTo)
	}
	t.Skipf("PostgreSQL tests skipped: %s is not set; enable them with %s", EnvPostgresDSN, PostgresHowTo)
	return ""
}

// PostgresSchemaDSN creates a new, empty schema (outbox_t_…) in the
// database of OUTBOX_TEST_POSTGRES_DSN and returns that DSN with the
// schema as its search_path, so unqualified tables and indexes go there.
// The schema and everything in it is dropped when t ends (after
// everything t.Cleanup registered later, such as closing pools opened on
// it). An unreachable server fails the test, never skips it.
//
// A schema is much cheaper than a database (no template copy) and keeps
// parallel tests apart; LISTEN/NOTIFY channels are per database, so
// listeners of same-named tables in two schemas hear each other (a
// spurious wake-up only).
func PostgresSchemaDSN(t testing.TB) string {
	t.Helper()
	base := PostgresDSN(t)
	name := databaseName(t)
	postgresScratch(t, base, "schema "+name, `CREATE SCHEMA "`+name+`"`, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`)
	return WithPostgresParam(t, base, "search_path", name)
}

// WithPostgresParam returns dsn with the connection parameter key set to
// value (a run-time parameter such as search_path or application_name,
// or a pgx setting), for URL and keyword/value DSNs alike.
func WithPostgresParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", EnvPostgresDSN, err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'"
}

// Postgres returns a pool on a new, empty schema (see
// [PostgresSchemaDSN]), closed when t ends.
func Postgres(t testing.TB) *sqlx.DB {
	t.Helper()
	return OpenPostgres(t, PostgresSchemaDSN(t))
}

// OpenPostgres opens dsn with the driver "pgx", checks the connection and
// closes the pool when t ends.
func OpenPostgres(t testing.TB, dsn string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	return db
}

// openPostgresAdmin connects with the configured DSN, failing t (never
// skipping) when the server cannot be reached.
func openPostgresAdmin(ctx context.Context, t testing.TB, dsn string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("%s: %v", EnvPostgresDSN, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		t.Fatalf("cannot reach the PostgreSQL server of %s: %v", EnvPostgresDSN, err)
	}
	return db
}
