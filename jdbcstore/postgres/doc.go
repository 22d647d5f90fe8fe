// Package postgres is the PostgreSQL 13+ dialect of package jdbcstore,
// over github.com/jackc/pgx/v5 through database/sql (package
// github.com/jackc/pgx/v5/stdlib, driver names "pgx" and "pgx/v5").
//
// Importing this package registers [Dialect] with jdbcstore and the pgx
// driver with database/sql, so stores on a "pgx" handle detect it:
//
//	import _ "github.com/outbox-go/outbox/jdbcstore/postgres"
//
//	db, err := sqlx.Open("pgx", "postgres://app@db:5432/app?sslmode=disable")
//
// Claims lock rows with FOR UPDATE SKIP LOCKED inside one UPDATE …
// RETURNING, so pollers on many nodes never wait for each other. Status
// writes are fenced on the lease owner like on every database.
//
// A failed statement aborts a PostgreSQL transaction. The store therefore
// inserts events with INSERT … ON CONFLICT (event_id) DO NOTHING: a
// duplicate id is reported as core.ErrDuplicateEvent from the row count,
// and the caller's transaction stays usable.
//
// The dialect also implements [jdbcstore.Notifier]: a publish runs
// pg_notify inside the business transaction (PostgreSQL delivers it only
// on commit), and outbox.New listens on the table's channel, so pollers on
// every node wake up at once instead of waiting for their interval.
//
// The package is pure Go: a program using only this dialect builds with
// CGO_ENABLED=0.
package postgres
