package main

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-go/outbox/internal/dsnsecret"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// looksPostgres reports whether a --dsn value is a PostgreSQL URL
// (postgres:// or postgresql://), which pgx opens.
func looksPostgres(dsn string) bool { return dsnsecret.LooksPostgresURL(dsn) }

// parsePostgres reads a PostgreSQL URL --dsn. pgx takes the database
// from the URL path, or the user's name without one. The scheme is
// lower-cased (pgx reads POSTGRES://… as a key=value string), nothing
// else.
func parsePostgres(raw string) (target, error) {
	scheme, rest, _ := strings.Cut(raw, "://")
	u := strings.ToLower(scheme) + "://" + rest
	if _, err := pgconn.ParseConfig(u); err != nil {
		return target{}, usagef("--dsn: not a PostgreSQL URL of the form postgres://user:pass@host:5432/db: %s", scrubSecret(err.Error(), u))
	}
	return target{driver: "pgx", dialect: pgdialect.Dialect, source: u, shown: maskDSN(u)}, nil
}

// postgresMissing reports a PostgreSQL error of this SQLSTATE: 42P01
// undefined_table, 42703 undefined_column.
func postgresMissing(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}
