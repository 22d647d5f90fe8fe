package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/outbox-go/outbox/internal/scratchdb"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	// The MySQL/MariaDB and PostgreSQL dialects, registered for the
	// drivers "mysql" and "pgx".
	_ "github.com/outbox-go/outbox/jdbcstore/mysql"
	_ "github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// The torture's own tables, next to the outbox table (jdbcstore.DefaultTable).
const (
	outboxTable     = jdbcstore.DefaultTable
	ledgerTable     = "torture_ledger"     // one row per committed business transaction
	deliveriesTable = "torture_deliveries" // one row per listener invocation
	rollbacksTable  = "torture_rollbacks"  // ids of transactions rolled back on purpose
	keysTable       = "torture_keys"       // per ordering key: the last commit position the publishers took
	streamTable     = "torture_stream"     // with -relay: one row per message of the run's stream

	insertLedger   = "INSERT INTO " + ledgerTable + " (event_id, child) VALUES (?, ?)"
	insertLedgerAt = "INSERT INTO " + ledgerTable + " (event_id, child, order_key, seq) VALUES (?, ?, ?, ?)"
	insertKey      = "INSERT INTO " + keysTable + " (order_key, last_seq) VALUES (?, 0)"
	// bumpKey and readKey take the next commit position of a key: the
	// UPDATE locks the key's row until the transaction ends, so the
	// positions of one key follow the order in which the transactions
	// commit, and a rollback returns its position.
	bumpKey        = "UPDATE " + keysTable + " SET last_seq = last_seq + 1 WHERE order_key = ?"
	readKey        = "SELECT last_seq FROM " + keysTable + " WHERE order_key = ?"
	insertDelivery = "INSERT INTO " + deliveriesTable + " (event_id, child, ok) VALUES (?, ?, ?)"
	insertRollback = "INSERT INTO " + rollbacksTable + " (event_id, child) VALUES (?, ?)"
	insertStream   = "INSERT INTO " + streamTable + " (stream_seq, event_id) VALUES (?, ?)"
)

// tableDDL returns the statements creating the torture's tables. On MySQL
// ids and keys are VARBINARY like the outbox's event_id and order_key, so
// joins compare bytes with bytes and use the indexes; on PostgreSQL they
// are text in the "C" collation, as in the outbox table.
//
// A delivery's id grows with the time its row was inserted: the check
// orders the deliveries of one key by it. That holds because the next
// event of a key is delivered only after its predecessor's listener
// returned, that is after the predecessor's delivery row committed (MySQL
// AUTO_INCREMENT, a PostgreSQL identity and SQLite's AUTOINCREMENT never
// hand out a smaller id later).
//
// The ledger's order_key and seq are the event's key and commit position
// (see bumpKey); NULL when the run does not track order. The stream table
// holds the messages of the run's JetStream stream (-relay): the stream
// sequence and the Nats-Msg-Id header, the event id ("" when missing).
func tableDDL(kind string) []string {
	if kind == "postgres" {
		return []string{
			"CREATE TABLE " + ledgerTable + ` (event_id VARCHAR(36) COLLATE "C" NOT NULL PRIMARY KEY, child INT NOT NULL,` +
				` order_key VARCHAR(255) COLLATE "C", seq BIGINT)`,
			"CREATE UNIQUE INDEX " + ledgerTable + "_order_idx ON " + ledgerTable + " (order_key, seq)",
			"CREATE TABLE " + deliveriesTable + ` (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,` +
				` event_id VARCHAR(36) COLLATE "C" NOT NULL, child INT NOT NULL, ok SMALLINT NOT NULL)`,
			"CREATE INDEX " + deliveriesTable + "_event_idx ON " + deliveriesTable + " (event_id)",
			"CREATE TABLE " + rollbacksTable + ` (event_id VARCHAR(36) COLLATE "C" NOT NULL PRIMARY KEY, child INT NOT NULL)`,
			"CREATE TABLE " + keysTable + ` (order_key VARCHAR(255) COLLATE "C" NOT NULL PRIMARY KEY, last_seq BIGINT NOT NULL)`,
			"CREATE TABLE " + streamTable + ` (stream_seq BIGINT NOT NULL PRIMARY KEY, event_id VARCHAR(255) COLLATE "C" NOT NULL)`,
			"CREATE INDEX " + streamTable + "_event_idx ON " + streamTable + " (event_id)",
		}
	}
	if kind == "mysql" {
		return []string{
			"CREATE TABLE " + ledgerTable + " (event_id VARBINARY(144) NOT NULL PRIMARY KEY, child INT NOT NULL," +
				" order_key VARBINARY(255) NULL, seq BIGINT NULL, UNIQUE KEY (order_key, seq)) ENGINE=InnoDB",
			"CREATE TABLE " + deliveriesTable + " (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY," +
				" event_id VARBINARY(144) NOT NULL, child INT NOT NULL, ok TINYINT NOT NULL, KEY (event_id)) ENGINE=InnoDB",
			"CREATE TABLE " + rollbacksTable + " (event_id VARBINARY(144) NOT NULL PRIMARY KEY, child INT NOT NULL) ENGINE=InnoDB",
			"CREATE TABLE " + keysTable + " (order_key VARBINARY(255) NOT NULL PRIMARY KEY, last_seq BIGINT NOT NULL) ENGINE=InnoDB",
			"CREATE TABLE " + streamTable + " (stream_seq BIGINT NOT NULL PRIMARY KEY, event_id VARBINARY(255) NOT NULL, KEY (event_id)) ENGINE=InnoDB",
		}
	}
	return []string{
		"CREATE TABLE " + ledgerTable + " (event_id TEXT NOT NULL PRIMARY KEY, child INTEGER NOT NULL, order_key TEXT, seq INTEGER)",
		"CREATE UNIQUE INDEX " + ledgerTable + "_order_idx ON " + ledgerTable + " (order_key, seq)",
		"CREATE TABLE " + deliveriesTable + " (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, child INTEGER NOT NULL, ok INTEGER NOT NULL)",
		"CREATE INDEX " + deliveriesTable + "_event_idx ON " + deliveriesTable + " (event_id)",
		"CREATE TABLE " + rollbacksTable + " (event_id TEXT NOT NULL PRIMARY KEY, child INTEGER NOT NULL)",
		"CREATE TABLE " + keysTable + " (order_key TEXT NOT NULL PRIMARY KEY, last_seq INTEGER NOT NULL)",
		"CREATE TABLE " + streamTable + " (stream_seq INTEGER NOT NULL PRIMARY KEY, event_id TEXT NOT NULL)",
		"CREATE INDEX " + streamTable + "_event_idx ON " + streamTable + " (event_id)",
	}
}

// keyName is the ordering key number k of a run: the key of aggregate
// (keyAggregate, k).
func keyName(k int) string { return core.AggregateOrderKey(keyAggregate, strconv.Itoa(k)) }

// keyAggregate is the aggregate type of the events of a run that tracks
// order: the key is the aggregate.
const keyAggregate = "TortureKey"

// freshDB is the run's database: created empty, with the outbox schema and
// the torture tables applied.
type freshDB struct {
	db       *sqlx.DB
	kind     string                  // "sqlite", "mysql" or "postgres"
	childDSN string                  // what a child opens: the SQLite path, the MySQL DSN or the PostgreSQL URL
	where    string                  // for humans: the file or the database name
	release  func(remove bool) error // after the pool is closed: remove the database or not, free the rest
}

// openFresh creates the run's database: a new SQLite file in a new
// temporary directory, or a new MySQL or PostgreSQL database
// outbox_torture_<random> on the server of o.dsn. It applies the outbox schema and the torture tables.
func openFresh(ctx context.Context, o *options, logger *slog.Logger) (*freshDB, error) {
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
	store, err := jdbcstore.New(f.db, jdbcstore.Config{Logger: logger})
	if err == nil {
		err = store.ApplySchema(ctx)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("apply outbox schema: %w", err), f.close(false))
	}
	for _, ddl := range tableDDL(f.kind) {
		if _, err := f.db.ExecContext(ctx, ddl); err != nil {
			return nil, errors.Join(fmt.Errorf("create torture tables: %w", err), f.close(false))
		}
	}
	if err := createKeys(ctx, f.db, o.keys); err != nil {
		return nil, errors.Join(fmt.Errorf("create the key rows: %w", err), f.close(false))
	}
	return f, nil
}

// createKeys inserts the counter rows of keys 0 to n-1, in one transaction.
func createKeys(ctx context.Context, db *sqlx.DB, n int) error {
	if n == 0 {
		return nil
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	stmt := tx.Rebind(insertKey)
	for k := range n {
		if _, err := tx.ExecContext(ctx, stmt, keyName(k)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// close closes the parent's pool and, unless keep, removes the database.
func (f *freshDB) close(keep bool) error {
	return errors.Join(f.db.Close(), f.release(!keep))
}

func openFreshSQLite() (*freshDB, error) {
	path, remove, err := scratchdb.SQLite("outbox-torture-*", "torture.db")
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(path)
	if err != nil {
		return nil, errors.Join(err, remove())
	}
	return &freshDB{db: db, kind: "sqlite", childDSN: path, where: "SQLite file " + path,
		release: func(rm bool) error {
			if !rm {
				return nil
			}
			return remove()
		}}, nil
}

// openFreshMySQL creates outbox_torture_<random> on the DSN's server
// (whatever database the DSN names) and opens it with the DSN's other
// settings.
func openFreshMySQL(ctx context.Context, dsn string) (*freshDB, error) {
	childDSN, name, release, err := scratchdb.MySQL(ctx, dsn, "outbox_torture_")
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open("mysql", childDSN)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open mysql: %w", err), release(true))
	}
	return &freshDB{db: db, kind: "mysql", childDSN: childDSN, where: "MySQL database " + name, release: release}, nil
}

// openFreshPostgres creates outbox_torture_<random> on the DSN's server
// (whatever database the DSN names) and opens it with the DSN's other
// settings.
func openFreshPostgres(ctx context.Context, dsn string) (*freshDB, error) {
	childDSN, name, release, err := scratchdb.Postgres(ctx, dsn, "outbox_torture_")
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open("pgx", childDSN)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open postgres: %w", err), release(true))
	}
	return &freshDB{db: db, kind: "postgres", childDSN: childDSN, where: "PostgreSQL database " + name, release: release}, nil
}

// openChildDB opens the run's database in a child process.
func openChildDB(kind, dsn string) (*sqlx.DB, error) {
	switch kind {
	case "mysql":
		return sqlx.Open("mysql", dsn)
	case "postgres":
		return sqlx.Open("pgx", dsn)
	}
	return sqlite.Open(dsn)
}
