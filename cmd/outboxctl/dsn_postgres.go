package main

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// looksPostgres reports whether a --dsn value is a PostgreSQL URL
// (postgres:// or postgresql://), which pgx opens.
func looksPostgres(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return true
	}
	return false
}

// parsePostgres reads a PostgreSQL URL --dsn. pgx takes the database
// from the URL path, or the user's name without one.
func parsePostgres(raw string) (target, error) {
	if _, err := pgconn.ParseConfig(raw); err != nil {
		return target{}, usagef("--dsn: not a PostgreSQL URL of the form postgres://user:pass@host:5432/db: %s", scrubSecret(err.Error(), raw))
	}
	return target{driver: "pgx", dialect: pgdialect.Dialect, source: raw, shown: maskDSN(raw)}, nil
}

// postgresPasswords returns the password spans of a PostgreSQL URL: the
// one of its user information and the value of a password query
// parameter.
func postgresPasswords(dsn string) [][2]int {
	var spans [][2]int
	_, rest, _ := strings.Cut(dsn, "://")
	start := len(dsn) - len(rest)
	authority := rest
	if k := strings.IndexAny(authority, "/?"); k >= 0 {
		authority = authority[:k]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if colon := strings.IndexByte(authority[:at], ':'); colon >= 0 && colon+1 < at {
			spans = append(spans, [2]int{start + colon + 1, start + at})
		}
	}
	if q := strings.IndexByte(dsn, '?'); q >= 0 {
		off := q + 1
		for _, kv := range strings.Split(dsn[q+1:], "&") {
			if v, ok := strings.CutPrefix(kv, "password="); ok && v != "" {
				spans = append(spans, [2]int{off + len("password="), off + len(kv)})
			}
			off += len(kv) + 1
		}
	}
	return spans
}

// maskPostgres returns a PostgreSQL URL with its passwords replaced by
// ***.
func maskPostgres(dsn string) string {
	spans := postgresPasswords(dsn)
	for i := len(spans) - 1; i >= 0; i-- {
		dsn = dsn[:spans[i][0]] + "***" + dsn[spans[i][1]:]
	}
	return dsn
}

// scrubPostgres masks the passwords of a PostgreSQL URL wherever they
// appear in msg.
func scrubPostgres(msg, dsn string) string {
	for _, s := range postgresPasswords(dsn) {
		msg = strings.ReplaceAll(msg, dsn[s[0]:s[1]], "***")
	}
	return msg
}

// postgresMissingTable reports a PostgreSQL undefined_table error.
func postgresMissingTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
