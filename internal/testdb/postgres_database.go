package testdb

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
)

// PostgresDatabaseDSN creates a new, empty database (outbox_t_…) on the
// server of OUTBOX_TEST_POSTGRES_DSN and returns that DSN pointing at it.
// The database is dropped (its remaining connections terminated) when t
// ends, after everything t.Cleanup registered later. An unreachable server
// fails the test, never skips it.
//
// Prefer [PostgresSchemaDSN], which is much cheaper: a database of its own
// is for tests about what PostgreSQL keeps per database, such as
// LISTEN/NOTIFY channels (two schemas of one database share them).
func PostgresDatabaseDSN(t testing.TB) string {
	t.Helper()
	base := PostgresDSN(t)
	name := databaseName(t)
	postgresScratch(t, base, "database "+name, `CREATE DATABASE "`+name+`"`, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
	return withPostgresDatabase(t, base, name)
}

// postgresScratch runs create on the server of base (failing t, never
// skipping, when it cannot be reached) and drop when t ends; what names
// the object in errors ("schema outbox_t_…").
func postgresScratch(t testing.TB, base, what, create, drop string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	db := openPostgresAdmin(ctx, t, base)
	defer db.Close()
	if _, err := db.ExecContext(ctx, create); err != nil {
		t.Fatalf("create test %s: %v", what, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		db, err := sqlx.Open("pgx", base)
		if err == nil {
			defer db.Close()
			_, err = db.ExecContext(ctx, drop)
		}
		if err != nil {
			t.Errorf("drop test %s: %v", what, err)
		}
	})
}

// withPostgresDatabase returns dsn naming the database name instead of
// its own, for URL and keyword/value DSNs alike.
func withPostgresDatabase(t testing.TB, dsn, name string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", EnvPostgresDSN, err)
		}
		u.Path = "/" + name
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return WithPostgresParam(t, dsn, "dbname", name) // the last dbname wins
}
