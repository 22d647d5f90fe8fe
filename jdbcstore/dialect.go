package jdbcstore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// Dialect is the SQL flavour of one database: its schema, how it stores
// times and payloads, how its placeholders look and how its driver reports
// duplicate keys and lock contention.
//
// The store builds the SQL text of every operation itself, from the
// primitives a Dialect gives (identifier quoting, bind type, time and
// payload encoding) and its [Capabilities]; a Dialect holds no SQL of its
// own apart from the schema templates.
//
// This package imports no database driver: the dialects live in
// per-database packages ([github.com/outbox-go/outbox/jdbcstore/sqlite],
// [github.com/outbox-go/outbox/jdbcstore/mysql],
// [github.com/outbox-go/outbox/jdbcstore/postgres]), each importing its own
// driver and calling [Register] from its init function. A third-party
// package adds a database the same way, and proves its dialect with the
// conformance suite in package jdbcstore/storetest.
//
// Every method must be safe for concurrent use; dialects are usually
// stateless values. A Dialect must be comparable with == (the registry
// and the conformance suite compare them): a struct holding a slice, a
// map or a func is not, so use a pointer to it. Its Capabilities must
// include SkipLocked or Returning: New refuses a dialect that could claim
// no row.
type Dialect interface {
	// Name returns a short lowercase name such as "sqlite" or "mysql",
	// used in error messages and logs.
	Name() string
	// DriverNames lists the database/sql driver names (the name given to
	// sql.Open or sqlx.Open) this dialect is chosen for when
	// Config.Dialect is nil, for example "mysql".
	DriverNames() []string
	// Capabilities declares the optional SQL features the store may use.
	// It must return the same value on every call.
	Capabilities() Capabilities
	// OutboxSchema returns the DDL of the outbox table as a text/template
	// executed with a [SchemaData]: statements end with ';' at the end of
	// a line, lines holding only a "--" comment are dropped. Each
	// statement must be idempotent (CREATE ... IF NOT EXISTS), since
	// ApplySchema runs at every start.
	OutboxSchema() string
	// InboxSchema returns the DDL of the inbox table of package
	// github.com/outbox-go/outbox/inbox (one row per message, keyed by
	// source and message_id; copy the columns of a dialect of this
	// module), a template of the same form as OutboxSchema.
	InboxSchema() string
	// QuoteIdent quotes an identifier (a table or index name) for the
	// database. Names reaching it already match
	// ^[A-Za-z_][A-Za-z0-9_]*$, so they need no escaping.
	QuoteIdent(name string) string
	// BindType is the sqlx bind type of the driver's placeholders
	// (sqlx.QUESTION, sqlx.DOLLAR, ...). The store writes statements with
	// '?' and rebinds them once with sqlx.Rebind.
	BindType() int
	// EncodeTime turns an instant into the driver argument stored in a
	// time column. Stored times must compare in instant order in SQL
	// (available_at <= ?), with at least microsecond precision.
	EncodeTime(t time.Time) any
	// DecodeTime turns a scanned time column back into a UTC time; a NULL
	// (nil) gives the zero time and no error. It must never panic.
	DecodeTime(v any) (time.Time, error)
	// EncodePayload turns a payload of the given kind into the driver
	// argument stored in the payload column. It rejects unknown kinds.
	EncodePayload(kind core.PayloadKind, p []byte) (any, error)
	// DecodePayload turns a scanned payload column back into the payload
	// bytes, the inverse of EncodePayload (byte-exact for
	// core.PayloadBytes; a JSON payload keeps its JSON value). It must
	// never panic, whatever v holds.
	DecodePayload(kind core.PayloadKind, v any) ([]byte, error)
	// Classify maps an error returned by the driver to what the store
	// must do about it; errors it does not know are [ClassOther].
	Classify(err error) ErrorClass
	// CheckSetup inspects the connection settings after the schema was
	// applied and logs what could hurt (a missing busy timeout, a wrong
	// character set, an old server). It never fails.
	CheckSetup(ctx context.Context, db *sqlx.DB, log *slog.Logger)
}

// Capabilities are the optional SQL features of a database. The store
// picks its claim and batch strategies from them; a database needs either
// SkipLocked or Returning to claim rows.
type Capabilities struct {
	// SkipLocked: SELECT ... FOR UPDATE SKIP LOCKED (MySQL 8, MariaDB
	// 10.6, PostgreSQL). Claims select and lock rows, then update them.
	SkipLocked bool
	// Returning: UPDATE ... RETURNING (SQLite 3.35, PostgreSQL). Claims
	// are one UPDATE returning the claimed rows, preferred over the
	// two-statement SkipLocked claim; with SkipLocked too, the UPDATE's
	// subquery selects the rows FOR UPDATE SKIP LOCKED (PostgreSQL).
	Returning bool
	// UpdateOrderLimit: UPDATE ... LIMIT (MySQL, MariaDB). Without it a
	// LIMIT goes into a subquery on the same table (SQLite, PostgreSQL).
	UpdateOrderLimit bool
	// SilentRollback: the server may roll a transaction back on its own
	// (deadlock, lock wait timeout, killed connection) and still let a
	// later COMMIT succeed, on nothing (MySQL, MariaDB). The store then
	// checks before commit that the transaction's first event row is
	// still there, and before an insert into a transaction that may have
	// failed that it is still open, with SELECT @@in_transaction: MySQL
	// and MariaDB SQL, for those databases only (MySQL's error 1193 for
	// the unknown variable turns that second check off).
	SilentRollback bool
	// SingleWriter: the database runs one write transaction at a time
	// (SQLite). Stores on one pool then share a write gate that lets
	// this process's writers (the stores' and, through outbox.New or
	// tenant.New, the business transactions) take turns in Go instead of
	// sleeping in the database's busy handler. It also means SQLite's
	// SQL where a schema like SQLite's asks for it: with Returning and
	// PendingIndex too, the store names the schema's pending, dead and
	// order indexes ({{.Index "pending"}}, "dead", "order") in its
	// claims and lists with INDEXED BY; and a schema whose trigger
	// refuses an ordered event at a stale position with the message
	// "outbox: stale order position" lets ordered publishes skip the read
	// of their key's last event (the store remembers it). Start from
	// jdbcstore/sqlite's schema for such a database.
	SingleWriter bool
	// OnDuplicateKeyUpdate: upserts are written INSERT ... ON DUPLICATE
	// KEY UPDATE (MySQL, MariaDB) instead of the standard INSERT ... ON
	// CONFLICT (key) DO UPDATE (SQLite 3.24, PostgreSQL). A column on the
	// right-hand side is the existing row's (qualified with the table name
	// in the ON CONFLICT form).
	OnDuplicateKeyUpdate bool
	// PredecessorByID: the keys table records the ids of each key's last
	// two events (columns last_id, id_seq and prev_id, as in the MySQL
	// schema), and an ordered insert checks the event before its own by
	// primary key instead of by position in the order index (MySQL,
	// MariaDB: InnoDB's locking read of that unique index, whose columns
	// are nullable, also locks the gap before the entry under REPEATABLE
	// READ until the transaction ends, holding up other transactions'
	// inserts there: unordered events, and the first event of a key
	// sorting just before). A keys table without those columns keeps the
	// read by position ([KeysUpgrader] adds them). It takes effect with
	// OnDuplicateKeyUpdate only.
	PredecessorByID bool
	// FailedStatementAbortsTx: a failed statement aborts the whole
	// transaction, every later statement fails until ROLLBACK
	// (PostgreSQL). The store then inserts events with INSERT ... ON
	// CONFLICT (event_id) DO NOTHING and reports a duplicate id from the
	// row count, so a duplicate leaves the caller's transaction usable,
	// and its other insert errors inside a caller's transaction say that
	// the transaction must be rolled back.
	FailedStatementAbortsTx bool
	// PendingIndex: the dialect's schema indexes the pending rows (NEW,
	// RETRY) alone, in claim order (available_at, created_at): a partial
	// index (SQLite, PostgreSQL). Claims then read both statuses in one
	// statement along it. Without it they read each status apart along a
	// (status, available_at, created_at) index, so that neither sorts the
	// whole backlog (MySQL, MariaDB: no partial indexes).
	PendingIndex bool
	// FinishedIndex: the dialect's schema indexes the finished rows (DONE,
	// DEAD) alone by (status, done_at): a partial index "WHERE status IN
	// (1, 3)" (SQLite). Publishing then writes no entry into it, and a
	// DONE write adds one instead of moving one. The statements that read
	// finished rows by status (the retention purge, the recent activity)
	// repeat that condition, since SQLite uses a partial index only when
	// the query states its WHERE term. The schema also has a partial
	// index of the RETRY rows ("WHERE status = 2"): NEW rows are counted
	// as the pending index's entries less those. Without it the schema
	// has a (status, done_at) index over every row.
	FinishedIndex bool
	// PadSpace: the database compares the outbox table's text columns
	// ignoring trailing spaces (MySQL and MariaDB's utf8mb4_bin, a PAD
	// SPACE collation, where 'Order' = 'Order '). The store then also
	// compares byte lengths, LENGTH(column), where it filters or groups
	// by event type or tenant, so that "Order" and "Order " stay two
	// types. Ids and ordering keys are binary columns, never padded.
	PadSpace bool
	// MaxBindParams is the most placeholders the driver and server take
	// in one statement (SQLite 32766 since 3.32, MySQL/MariaDB and
	// PostgreSQL 65535). The store splits a batch insert
	// (Store.InsertBatch) into statements under it. Zero means 999, the
	// old SQLite limit, which every database takes.
	MaxBindParams int
}

// TimeSelector is implemented by dialects that must not let the driver
// decode time columns (go-sql-driver/mysql with parseTime=true builds a
// time.Time in the DSN's loc, which shifts wall clocks that fall into a
// daylight saving gap). Reads select SelectTime(column) instead of the
// column itself; DecodeTime receives what that expression returns.
type TimeSelector interface {
	// SelectTime returns the SELECT expression reading a time column.
	SelectTime(column string) string
}

// SessionChecker is implemented by dialects that can tell from a
// connection's settings that the store cannot work on it: MySQL's
// autocommit turned off (the store's writes outside a transaction would
// never commit), PostgreSQL's DateStyle other than ISO on a connection
// that reads results as text (no time could be read back). CheckSession
// returns what is wrong and what to change, nil when nothing is;
// [Store.ApplySchema] and the inbox's ApplySchema run it on their
// connection before the schema's first statement and refuse the
// connection with a *core.ConfigError of field "db" that states it.
// It must not fail for a setting it cannot read.
type SessionChecker interface {
	CheckSession(ctx context.Context, conn *sql.Conn) error
}

// checkSession runs d's SessionChecker, if any, on conn.
func checkSession(ctx context.Context, conn *sql.Conn, d Dialect) error {
	c, ok := d.(SessionChecker)
	if !ok {
		return nil
	}
	if err := c.CheckSession(ctx, conn); err != nil {
		return &core.ConfigError{Field: "db", Msg: fmt.Sprintf("(the %s connection): %v", d.Name(), err)}
	}
	return nil
}

// SchemaUpgrader is implemented by dialects that can bring an outbox
// table created by an earlier release of this module up to the current
// columns. OutboxUpgrade returns a template of the same form as
// OutboxSchema; [Store.ApplySchema] runs it right after the schema's first
// statement (the CREATE TABLE) when the table lacks the ordering columns
// (order_key, order_seq, order_skip), then runs the rest of the schema,
// which creates what the upgrade did not (indexes, the keys table).
type SchemaUpgrader interface {
	OutboxUpgrade() string
}

// KeysUpgrader is implemented by dialects with
// [Capabilities].PredecessorByID whose keys table, as an earlier release
// created it, lacks the id columns. KeysUpgrade returns a template of the
// same form as OutboxSchema ({{.Keys}} names the keys table) that adds
// them; [Store.ApplySchema] runs it when they are missing.
type KeysUpgrader interface {
	KeysUpgrade() string
}

// ObjectOwnerFinder is implemented by dialects whose index (and trigger)
// names are global to a schema, not to a table (SQLite, PostgreSQL): a
// table renamed away keeps its indexes' names, and CREATE INDEX IF NOT
// EXISTS for a new table of the old name then creates nothing.
// [Store.ApplySchema] asks, for every index and trigger its schema
// creates, which table holds it, and refuses a schema whose objects a
// table of another name holds. TableOf returns the table the index or
// trigger called name (as the schema writes it, unquoted) belongs to on
// conn's current schema, "" when there is none.
type ObjectOwnerFinder interface {
	TableOf(ctx context.Context, conn *sql.Conn, name string) (string, error)
}

// SchemaLocker is implemented by dialects whose schema statements are not
// safe when several nodes apply the schema at once (PostgreSQL's CREATE …
// IF NOT EXISTS races on its catalogs and fails with a unique violation;
// SQLite's upgrade is several ALTER TABLE statements). LockSchema takes,
// on conn, a lock that serializes [Store.ApplySchema] (and the inbox's)
// across processes for the object called name; the schema statements
// then run on conn, and release gives the lock back, keeping their
// effects when commit is true (a lock that is a transaction commits it;
// otherwise rolls it back).
type SchemaLocker interface {
	LockSchema(ctx context.Context, conn *sql.Conn, name string) (release func(commit bool) error, err error)
}

// DDLLockTimeouter is implemented by dialects whose schema changes queue
// for a table lock (MySQL/MariaDB's metadata lock, PostgreSQL's
// ACCESS EXCLUSIVE lock): an ALTER TABLE waiting for a transaction open
// on the table makes every later statement on the table wait behind it,
// on every node, for as long as that transaction stays open (MariaDB's
// lock_wait_timeout is a day). [Store.ApplySchema] runs its statements
// on a session whose lock wait set bounds (to a second or less), and
// tries again, pausing between tries so that the table's other users go
// on, with a WARN while it waits; reset restores the session's default
// before the connection goes back to the pool.
type DDLLockTimeouter interface {
	DDLLockTimeout() (set, reset string)
}

// IndexChecker is implemented by dialects whose store may name an index
// in its queries, where the planner may pick a worse one on a large table
// (SQLite's INDEXED BY: without statistics; [DeadTypeHinter]). HasIndex
// reports whether table has an index called name whose key holds every
// one of columns. A store asks once, on its first claim, poll or
// dead-letter list, before naming an index: a table created by an earlier
// release may lack it or hold it with fewer columns.
type IndexChecker interface {
	HasIndex(ctx context.Context, db sqlx.QueryerContext, table, name string, columns ...string) (bool, error)
}

// DeadTypeHinter is implemented by dialects whose planner may read a
// dead-letter list filtered by event type (or tenant, or time: the store
// uses the hint for those too) along the primary key, in id
// order, until it has found a page of matches (MySQL/MariaDB: with DEAD
// rows of that type rare or absent, most of the table). DeadTypeHint
// returns the index that finds the DEAD rows of a type (its name and the
// columns its key must hold, checked through [IndexChecker]) and the
// clause naming it, written after the table name.
type DeadTypeHinter interface {
	DeadTypeHint() (index string, columns []string, clause string)
}

// Opener is implemented by dialects whose database needs connection
// settings a plain sqlx.Open would not set (SQLite: WAL, busy timeout,
// immediate transactions). [Open] uses it.
type Opener interface {
	// Open opens the database described by dsn, without connecting yet.
	Open(dsn string) (*sqlx.DB, error)
}

// ErrorClass is how the store reacts to a driver error, as reported by
// [Dialect.Classify].
type ErrorClass int

const (
	// ClassOther is any error the store returns to the caller as is
	// (wrapped).
	ClassOther ErrorClass = iota
	// ClassDuplicate is a primary key or unique violation: the event id
	// already exists. The store wraps it with core.ErrDuplicateEvent.
	ClassDuplicate
	// ClassBusy is transient lock contention (SQLite busy, a MySQL
	// deadlock or lock wait timeout): a single statement outside a
	// caller's transaction may be retried, a transaction must be rolled
	// back and run again.
	ClassBusy
)

// String returns "other", "duplicate" or "busy".
func (c ErrorClass) String() string {
	switch c {
	case ClassDuplicate:
		return "duplicate"
	case ClassBusy:
		return "busy"
	case ClassOther:
		return "other"
	}
	return "ErrorClass(" + itoa(int(c)) + ")"
}
