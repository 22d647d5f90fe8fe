package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/outbox-go/outbox/internal/scratchdb"

	"github.com/jmoiron/sqlx"

	// The MySQL/MariaDB and PostgreSQL dialects, registered for the
	// drivers "mysql" and "pgx".
	_ "github.com/outbox-go/outbox/jdbcstore/mysql"
	_ "github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// freshDB is an empty database made for one scenario, with the business
// table already created. Close releases it (and drops or deletes it).
type freshDB struct {
	db   *sqlx.DB
	kind string // "sqlite", "mysql" or "postgres"
	// dsn opens the same database from another process: the SQLite
	// file's path, or the DSN of the new MySQL or PostgreSQL database.
	dsn     string
	cleanup func() error
	// insertOrder is insertOrderSQL in the database's placeholders.
	insertOrder string
}

// Close closes the pool and removes the database.
func (f *freshDB) Close() error { return f.cleanup() }

// openFresh creates a new, empty database for one scenario: a new SQLite
// file in a temporary directory, opened with sqlite.Open (WAL,
// synchronous=NORMAL, immediate transactions), or a new MySQL or
// PostgreSQL database outbox_bench_<random> on the DSN's server. Both the floor and the
// framework scenarios get the same pool settings.
func openFresh(ctx context.Context, o *options) (*freshDB, error) {
	var (
		f   *freshDB
		err error
	)
	switch o.db {
	case "mysql":
		f, err = openFreshMySQL(ctx, o.dsn)
	case "postgres":
		f, err = openFreshPostgres(ctx, o.dsn)
	default:
		f, err = openFreshSQLite()
	}
	if err != nil {
		return nil, err
	}
	f.setup(o)
	if err := createBusinessTable(ctx, f.db, f.kind); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// setup prepares the business INSERT and sets the pool of every
// scenario.
func (f *freshDB) setup(o *options) {
	f.insertOrder = f.db.Rebind(insertOrderSQL)
	// database/sql keeps only 2 idle connections by default: with W
	// writers, W dispatcher workers, the DONE batcher and the poller it
	// would close and reopen connections all the time.
	f.db.SetMaxIdleConns(2*o.workers + 8)
	f.db.SetMaxOpenConns(o.maxOpen)
}

// openFreshSQLite opens a new database file in a new temporary directory.
func openFreshSQLite() (*freshDB, error) {
	path, remove, err := scratchdb.SQLite("outbox-bench-*", "bench.db")
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(path)
	if err != nil {
		return nil, errors.Join(err, remove())
	}
	return &freshDB{db: db, kind: "sqlite", dsn: path, cleanup: func() error {
		return errors.Join(db.Close(), remove())
	}}, nil
}

// openFreshMySQL creates the database outbox_bench_<random> on the DSN's
// server (whatever database the DSN names) and opens it with the DSN's
// other settings. Close drops it.
func openFreshMySQL(ctx context.Context, dsn string) (*freshDB, error) {
	newDSN, _, drop, err := scratchdb.MySQL(ctx, dsn, "outbox_bench_")
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open("mysql", newDSN)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open mysql: %w", err), drop(true))
	}
	return &freshDB{db: db, kind: "mysql", dsn: newDSN, cleanup: func() error {
		return errors.Join(db.Close(), drop(true))
	}}, nil
}

// openFreshPostgres creates the database outbox_bench_<random> on the
// DSN's server (whatever database the DSN names) and opens it with the
// DSN's other settings. Close drops it.
func openFreshPostgres(ctx context.Context, dsn string) (*freshDB, error) {
	newDSN, _, drop, err := scratchdb.Postgres(ctx, dsn, "outbox_bench_")
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open("pgx", newDSN)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open postgres: %w", err), drop(true))
	}
	return &freshDB{db: db, kind: "postgres", dsn: newDSN, cleanup: func() error {
		return errors.Join(db.Close(), drop(true))
	}}, nil
}

// The business table: one row per transaction in every scenario.
const (
	ordersTable    = "bench_orders"
	insertOrderSQL = "INSERT INTO " + ordersTable + " (ref, amount) VALUES (?, ?)"
)

// createBusinessTable creates the business table in the dialect of kind.
func createBusinessTable(ctx context.Context, db *sqlx.DB, kind string) error {
	ddl := "CREATE TABLE " + ordersTable + " (id INTEGER PRIMARY KEY, ref TEXT NOT NULL, amount INTEGER NOT NULL)"
	switch kind {
	case "mysql":
		ddl = "CREATE TABLE " + ordersTable + " (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY," +
			" ref VARCHAR(64) NOT NULL, amount BIGINT NOT NULL) ENGINE=InnoDB"
	case "postgres":
		ddl = "CREATE TABLE " + ordersTable + " (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY," +
			" ref VARCHAR(64) NOT NULL, amount BIGINT NOT NULL)"
	}
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create business table: %w", err)
	}
	return nil
}
