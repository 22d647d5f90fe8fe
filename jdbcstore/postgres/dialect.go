package postgres

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"

	// The database/sql driver "pgx".
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/jsoncol"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Dialect is the dialect of PostgreSQL 13+ through pgx v5's database/sql
// driver (driver names "pgx" and "pgx/v5"), registered with
// [jdbcstore.Register] when this package is imported.
//
// Times are timestamptz columns: instants with microsecond precision,
// whatever the session TimeZone. The store sends them as UTC time.Time
// values truncated (never rounded) to microseconds.
//
// Text keys (event_id, the inbox's source and message_id) use the "C"
// collation: they compare and sort byte for byte.
//
// The payload column is jsonb. A JSON payload is stored as the document
// (jsonb keeps its value; key order and whitespace are normalized); jsonb
// cannot hold the escape \u0000, a lone UTF-16 surrogate (\ud800) or a
// number beyond numeric's range, and it keeps every digit of a number
// written out in full (1e1000 is stored as 1,001 digits), so a payload
// that holds the first or would grow past core.MaxPayloadBytes is refused
// with core.ErrInvalidJSON before it reaches the server. A bytes payload
// is stored as a JSON string holding its standard base64 encoding, so it
// round-trips byte-exact.
var Dialect jdbcstore.Dialect = pgDialect{}

//go:embed schema/outbox.sql
var outboxSchema string

//go:embed schema/inbox.sql
var inboxSchema string

//go:embed schema/outbox_upgrade.sql
var outboxUpgrade string

func init() { jdbcstore.Register(Dialect) }

type pgDialect struct{}

func (pgDialect) Name() string          { return "postgres" }
func (pgDialect) DriverNames() []string { return []string{"pgx", "pgx/v5"} }
func (pgDialect) OutboxSchema() string  { return outboxSchema }
func (pgDialect) InboxSchema() string   { return inboxSchema }

// OutboxUpgrade implements jdbcstore.SchemaUpgrader: the ordering columns
// for a table created before ordered delivery.
func (pgDialect) OutboxUpgrade() string { return outboxUpgrade }
func (pgDialect) BindType() int         { return sqlx.DOLLAR }

// DDLLockTimeout implements jdbcstore.DDLLockTimeouter: the session's wait
// for a table lock is bounded to 200 ms, then reset to its default.
func (pgDialect) DDLLockTimeout() (set, reset string) {
	return "SET lock_timeout = '200ms'", "RESET lock_timeout"
}

func (pgDialect) Capabilities() jdbcstore.Capabilities {
	// SKIP LOCKED since 9.5, RETURNING on every write, ON CONFLICT since
	// 9.5. No UPDATE … LIMIT. A failed statement aborts the transaction
	// (every later statement fails until ROLLBACK) and COMMIT then rolls
	// back visibly: nothing is ever committed silently.
	return jdbcstore.Capabilities{SkipLocked: true, Returning: true, FailedStatementAbortsTx: true, PendingIndex: true, MaxBindParams: 65535}
}

// QuoteIdent uses double quotes; validated names hold none. Quoting also
// keeps reserved words ("order") and the case of the name.
func (pgDialect) QuoteIdent(name string) string { return `"` + name + `"` }

// EncodeTime returns t in UTC, truncated (never rounded) to microseconds,
// timestamptz's precision.
func (pgDialect) EncodeTime(t time.Time) any { return t.UTC().Truncate(time.Microsecond) }

// DecodeTime accepts what pgx returns for a timestamptz (a time.Time in
// the process's local zone) and the text form of one, for callers reading
// through the simple protocol.
func (pgDialect) DecodeTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return v.UTC().Truncate(time.Microsecond), nil
	case string:
		return parseTime(v)
	case []byte:
		return parseTime(string(v))
	}
	return time.Time{}, fmt.Errorf("stored time is %T, want timestamptz", v)
}

// pgTimeLayouts are the text forms of a timestamptz (DateStyle ISO) with
// and without minutes in the offset.
var pgTimeLayouts = []string{"2006-01-02 15:04:05.999999Z07", "2006-01-02 15:04:05.999999Z07:00", time.RFC3339Nano}

func parseTime(s string) (time.Time, error) {
	for _, layout := range pgTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Truncate(time.Microsecond), nil
		}
	}
	return time.Time{}, fmt.Errorf("stored time %.40q is not a timestamptz", s)
}

func (pgDialect) EncodePayload(kind core.PayloadKind, p []byte) (any, error) {
	return encodePayload(kind, p)
}

func (pgDialect) DecodePayload(kind core.PayloadKind, v any) ([]byte, error) {
	return jsoncol.Decode(kind, v)
}

// PostgreSQL SQLSTATE codes the store reacts to.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeUndefinedObject      = "42704" // an unknown configuration parameter, among others
)

// Classify maps server errors: a unique violation is a duplicate event; a
// serialization failure, a deadlock and a lock timeout (lock_timeout,
// NOWAIT) are contention. Each of them aborts the statement's
// transaction, so only a lone autocommit statement or a whole transaction
// may be retried, which is what the store does.
func (pgDialect) Classify(err error) jdbcstore.ErrorClass {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe == nil {
		return jdbcstore.ClassOther
	}
	switch pe.Code {
	case codeUniqueViolation:
		return jdbcstore.ClassDuplicate
	case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable:
		return jdbcstore.ClassBusy
	}
	return jdbcstore.ClassOther
}

// minServerVersion is the oldest supported server_version_num.
const minServerVersion = 130000

// CheckSetup warns when the server is older than PostgreSQL 13 or the
// database encoding is not UTF8 (text beyond ASCII could be refused).
func (pgDialect) CheckSetup(ctx context.Context, db *sqlx.DB, log *slog.Logger) {
	var (
		version  int
		encoding string
	)
	err := db.QueryRowContext(ctx, "SELECT current_setting('server_version_num')::int, current_setting('server_encoding')").
		Scan(&version, &encoding)
	if err != nil {
		log.DebugContext(ctx, "outbox: postgres: cannot read the server settings", slog.Any("error", err))
		return
	}
	if version < minServerVersion {
		log.WarnContext(ctx, "outbox: postgres: server older than PostgreSQL 13; it is not supported",
			slog.Int("server_version_num", version))
	}
	if encoding != "UTF8" {
		log.WarnContext(ctx, "outbox: postgres: the database encoding is not UTF8; events with characters outside it will fail",
			slog.String("server_encoding", encoding))
	}
}

// CheckSession implements jdbcstore.SessionChecker: a connection that
// reads results as text (default_query_exec_mode simple_protocol or exec,
// which PgBouncer's transaction pooling needs) must have DateStyle ISO,
// the only text form of a time pgx reads. Another (German, "SQL, DMY")
// failed every claim and every read of an event ("invalid PostgreSQL
// date/time value"), while publishing went on: events of the poller's
// path were never delivered. The check reads a time back on the
// connection when DateStyle is not ISO.
func (pgDialect) CheckSession(ctx context.Context, conn *sql.Conn) error {
	var style string
	if err := conn.QueryRowContext(ctx, "SHOW DateStyle").Scan(&style); err != nil || strings.HasPrefix(style, "ISO") {
		return nil
	}
	var t time.Time
	if err := conn.QueryRowContext(ctx, "SELECT now()").Scan(&t); err != nil {
		return fmt.Errorf("DateStyle is %q and the connection reads results as text (default_query_exec_mode simple_protocol or exec), where times can be read in DateStyle ISO only (%v); set DateStyle=ISO (a DSN parameter, or ALTER ROLE … SET DateStyle = 'ISO')", style, err)
	}
	return nil
}

// LockSchema implements jdbcstore.SchemaLocker: a session advisory lock
// keyed by the table's name, so that processes starting at once apply the
// schema one after the other (two concurrent CREATE TABLE IF NOT EXISTS
// of one table race in PostgreSQL's catalogs, and the loser fails with a
// unique violation instead of finding the table).
func (pgDialect) LockSchema(ctx context.Context, conn *sql.Conn, name string) (func(commit bool) error, error) {
	h := fnv.New64a()
	_, _ = h.Write([]byte("github.com/outbox-go/outbox schema " + name))
	key := int64(h.Sum64()) //nolint:gosec // any 64 bits make a key
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return nil, err
	}
	return func(bool) error {
		// The lock must go even when ctx has: the connection goes back to
		// the pool, and a session lock would stay with it.
		_, err := conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key)
		return err
	}, nil
}

// maxIdentLen is the length PostgreSQL cuts every identifier to
// (NAMEDATALEN - 1), in each statement alike.
const maxIdentLen = 63

// TableOf implements jdbcstore.ObjectOwnerFinder: the table of the index
// called name (cut as PostgreSQL cuts it) in the current schema, or, when
// another kind of relation has that name (which CREATE INDEX IF NOT
// EXISTS skips as well), that relation's own name; "" when there is none.
func (pgDialect) TableOf(ctx context.Context, conn *sql.Conn, name string) (string, error) {
	if len(name) > maxIdentLen {
		name = name[:maxIdentLen]
	}
	var owner string
	err := conn.QueryRowContext(ctx, `SELECT COALESCE(t.relname, o.relname) FROM pg_class o
		JOIN pg_namespace n ON n.oid = o.relnamespace
		LEFT JOIN pg_index x ON x.indexrelid = o.oid
		LEFT JOIN pg_class t ON t.oid = x.indrelid
		WHERE o.relname = $1 AND n.nspname = current_schema()`, name).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return owner, err
}
