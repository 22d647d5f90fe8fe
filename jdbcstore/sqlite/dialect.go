package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Dialect is the dialect of github.com/mattn/go-sqlite3 (driver name
// "sqlite3"), registered with [jdbcstore.Register] when this package is
// imported. Times are stored as INTEGER Unix microseconds in UTC, so
// comparisons are numeric and exact; payloads are stored as BLOB bytes,
// byte-exact for both payload kinds. Open the database with [Open]
// (WAL, busy timeout, immediate transactions).
var Dialect jdbcstore.Dialect = sqliteDialect{}

//go:embed schema/outbox.sql
var outboxSchema string

//go:embed schema/inbox.sql
var inboxSchema string

//go:embed schema/outbox_upgrade.sql
var outboxUpgrade string

func init() { jdbcstore.Register(Dialect) }

type sqliteDialect struct{}

func (sqliteDialect) Name() string          { return "sqlite" }
func (sqliteDialect) DriverNames() []string { return []string{"sqlite3"} }
func (sqliteDialect) OutboxSchema() string  { return outboxSchema }
func (sqliteDialect) InboxSchema() string   { return inboxSchema }

// OutboxUpgrade implements jdbcstore.SchemaUpgrader: the ordering columns
// for a table created before ordered delivery.
func (sqliteDialect) OutboxUpgrade() string { return outboxUpgrade }
func (sqliteDialect) BindType() int         { return sqlx.QUESTION }

func (sqliteDialect) Capabilities() jdbcstore.Capabilities {
	// RETURNING needs SQLite 3.35 (2021). UPDATE ... LIMIT needs a
	// compile option a system libsqlite3 may lack, so claims will not
	// rely on it; SQLite has no row locks to skip. One write transaction
	// runs at a time. Partial indexes keep the pending rows and the
	// finished rows apart.
	return jdbcstore.Capabilities{Returning: true, SingleWriter: true, PendingIndex: true, FinishedIndex: true, MaxBindParams: 32766}
}

// quoteIdent uses standard double quotes; validated names hold no quote.
func (sqliteDialect) QuoteIdent(name string) string { return `"` + name + `"` }

func (sqliteDialect) EncodeTime(t time.Time) any { return t.UnixMicro() }

func (sqliteDialect) DecodeTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case int64:
		return time.UnixMicro(v).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("stored time is %T, want INTEGER microseconds", v)
}

func (sqliteDialect) EncodePayload(kind core.PayloadKind, p []byte) (any, error) {
	return sqliteEncodePayload(kind, p)
}

func (sqliteDialect) DecodePayload(kind core.PayloadKind, v any) ([]byte, error) {
	switch v := v.(type) {
	case []byte:
		return sqliteDecodePayload(kind, v)
	case string: // a row written by hand with a TEXT payload
		return sqliteDecodePayload(kind, []byte(v))
	case nil:
		return nil, errors.New("stored payload is NULL")
	}
	return nil, fmt.Errorf("stored payload is %T, want BLOB", v)
}

// sqliteEncodePayload returns the BLOB stored for a payload: the bytes
// themselves, whatever the kind. It never returns nil for a known kind,
// because the driver binds a nil []byte as NULL.
func sqliteEncodePayload(kind core.PayloadKind, p []byte) ([]byte, error) {
	if err := checkPayloadKind(kind); err != nil {
		return nil, err
	}
	if p == nil {
		p = []byte{}
	}
	return p, nil
}

// sqliteDecodePayload is the inverse of sqliteEncodePayload. It rejects
// unknown kinds and never panics.
func sqliteDecodePayload(kind core.PayloadKind, stored []byte) ([]byte, error) {
	if err := checkPayloadKind(kind); err != nil {
		return nil, err
	}
	if stored == nil {
		stored = []byte{}
	}
	return stored, nil
}

func checkPayloadKind(kind core.PayloadKind) error {
	switch kind {
	case core.PayloadJSON, core.PayloadBytes:
		return nil
	}
	return fmt.Errorf("unknown payload kind %d", uint8(kind))
}

// classify maps mattn/go-sqlite3 errors: SQLITE_BUSY and SQLITE_LOCKED are
// contention, a primary key or unique constraint is a duplicate.
func (sqliteDialect) Classify(err error) jdbcstore.ErrorClass {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		var sp *sqlite3.Error
		if !errors.As(err, &sp) || sp == nil {
			return jdbcstore.ClassOther
		}
		se = *sp
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return jdbcstore.ClassBusy
	case sqlite3.ErrConstraint:
		switch se.ExtendedCode {
		case sqlite3.ErrConstraintPrimaryKey, sqlite3.ErrConstraintUnique:
			return jdbcstore.ClassDuplicate
		}
	}
	return jdbcstore.ClassOther
}

// checkSetup warns when the connection has no busy timeout or does not use
// WAL (unless the database is in memory or temporary, one connection's
// alone): business transactions and status writes would then fail with
// "database is locked" or serialize readers behind writers. It also warns
// about a database in memory (or a temporary one) on a pool of more than
// one connection: each connection has a database of its own, and most
// statements then miss the outbox's table.
func (sqliteDialect) CheckSetup(ctx context.Context, db *sqlx.DB, log *slog.Logger) {
	var (
		seq        int
		name, file string
	)
	err := db.QueryRowContext(ctx, "PRAGMA database_list").Scan(&seq, &name, &file)
	temporary := err == nil && file == "" // in memory, or a temporary file: no other process
	if temporary && db.Stats().MaxOpenConnections != 1 {
		log.WarnContext(ctx, "outbox: sqlite: the database is in memory (or temporary) and the pool may open several connections, each with a database of its own: open it with sqlite.Open or call SetMaxOpenConns(1)")
	}
	var locking string
	if err := db.QueryRowContext(ctx, "PRAGMA locking_mode").Scan(&locking); err == nil &&
		strings.EqualFold(locking, "exclusive") && db.Stats().MaxOpenConnections != 1 {
		log.WarnContext(ctx, "outbox: sqlite: the locking mode is exclusive and the pool may open several connections: the first one keeps the file locked and the others wait out the busy timeout, then fail; open it with sqlite.Open or call SetMaxOpenConns(1)")
	}
	var timeoutMS int64
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeoutMS); err != nil {
		log.DebugContext(ctx, "outbox: sqlite: cannot read busy_timeout", slog.Any("error", err))
		return
	}
	if timeoutMS == 0 {
		log.WarnContext(ctx, "outbox: sqlite: busy_timeout is 0; open the database with sqlite.Open or set _busy_timeout in the DSN, or concurrent writers fail with \"database is locked\"")
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		log.DebugContext(ctx, "outbox: sqlite: cannot read journal_mode", slog.Any("error", err))
		return
	}
	if !temporary && !strings.EqualFold(mode, "wal") && !strings.EqualFold(mode, "memory") {
		log.WarnContext(ctx, "outbox: sqlite: journal_mode is not WAL; readers and writers will block each other", slog.String("journal_mode", mode))
	}
}

// Open opens the database with [Open]; it makes the dialect a
// [jdbcstore.Opener], so jdbcstore.Open("sqlite3", path) and the tenant
// package get the same settings.
// HasIndex implements jdbcstore.IndexChecker: whether the main
// database has an index called name on table whose key holds columns.
func (sqliteDialect) HasIndex(ctx context.Context, db sqlx.QueryerContext, table, name string, columns ...string) (bool, error) {
	var n int
	if err := sqlx.GetContext(ctx, db, &n, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND name = ?", table, name); err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	var have []string
	if err := sqlx.SelectContext(ctx, db, &have, "SELECT name FROM pragma_index_info(?) WHERE name IS NOT NULL", name); err != nil {
		return false, err
	}
	return containsAll(have, columns), nil
}

// containsAll reports whether have holds every one of want.
func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func (sqliteDialect) Open(dsn string) (*sqlx.DB, error) { return Open(dsn) }

// LockSchema implements jdbcstore.SchemaLocker: the schema is applied in
// one BEGIN IMMEDIATE transaction, which holds SQLite's write lock, so
// processes that start at once apply it one after the other and an
// upgrade's ALTER TABLE statements take effect together or not at all.
func (sqliteDialect) LockSchema(ctx context.Context, conn *sql.Conn, _ string) (func(commit bool) error, error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, err
	}
	return func(commit bool) error {
		end := "ROLLBACK"
		if commit {
			end = "COMMIT"
		}
		// The transaction must end even when ctx has: the connection goes
		// back to the pool.
		_, err := conn.ExecContext(context.WithoutCancel(ctx), end)
		return err
	}, nil
}

// TableOf implements jdbcstore.ObjectOwnerFinder: the table of the index
// or trigger called name in the main database, "" when there is none.
func (sqliteDialect) TableOf(ctx context.Context, conn *sql.Conn, name string) (string, error) {
	var owner string
	err := conn.QueryRowContext(ctx, "SELECT tbl_name FROM sqlite_master WHERE type IN ('index', 'trigger') AND name = ? COLLATE NOCASE", name).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return owner, err
}
