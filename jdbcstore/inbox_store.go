package jdbcstore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/inboxrow"
)

// inboxStore is the SQL store of package inbox: one table keyed by
// (source, message_id) holding every message seen, its state (Seen,
// Processing, Done, Dead), its lease and its retry schedule. It runs on
// the same dialects as [Store] and is safe for concurrent use. Package
// inbox reaches it through internal/inboxrow (see init), so jdbcstore
// exports none of it.
//
// The store does not validate message fields: package inbox does. Times
// come from Config.Now (the application clock, like the outbox store), not
// from the database server.
type inboxStore struct {
	db      *sqlx.DB
	dialect Dialect
	table   string
	maxErr  int
	now     func() time.Time
	log     *slog.Logger
	schema  string
	q       inboxStatements

	// shell carries db, dialect and clock for the helpers shared with
	// Store (the busy retry, the savepoint check before commit); it is never
	// used as an outbox store.
	shell *Store
}

func init() { inboxrow.Open = openInbox }

var _ inboxrow.Store = (*inboxStore)(nil)

// openInbox is inboxrow.Open: the inbox store over db for o.
func openInbox(db *sqlx.DB, o inboxrow.Options) (inboxrow.Store, error) {
	cfg := Config{Table: o.Table, MaxErrorLen: o.MaxErrorLen, Now: o.Now, Logger: o.Logger}
	if o.Dialect != nil {
		d, ok := o.Dialect.(Dialect)
		if !ok {
			return nil, &core.ConfigError{Field: "Dialect", Msg: fmt.Sprintf("%T is not a jdbcstore.Dialect", o.Dialect)}
		}
		cfg.Dialect = d
	}
	if cfg.Table == "" {
		return nil, &core.ConfigError{Field: "Table", Msg: "must not be empty"}
	}
	s, err := newInboxStore(db, cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newInboxStore returns an inbox store over db. cfg is the outbox store's
// Config, with the inbox's table; Dialect, MaxErrorLen, Now and Logger
// have the same meaning and defaults. It validates cfg and renders the
// SQL but does not touch the database: ApplySchema creates the table.
func newInboxStore(db *sqlx.DB, cfg Config) (*inboxStore, error) {
	cfg, err := cfg.resolve(db)
	if err != nil {
		return nil, err
	}
	schema, err := renderInboxSchema(cfg.Dialect, cfg.Table)
	if err != nil {
		return nil, err
	}
	return &inboxStore{
		db:      db,
		dialect: cfg.Dialect,
		table:   cfg.Table,
		maxErr:  cfg.MaxErrorLen,
		now:     cfg.Now,
		log:     cfg.Logger,
		schema:  schema,
		q:       buildInboxStatements(cfg.Dialect, cfg.Table),
		shell:   &Store{db: db, dialect: cfg.Dialect, table: cfg.Table, now: cfg.Now, log: cfg.Logger},
	}, nil
}

// Table returns the inbox table name.
func (s *inboxStore) Table() string { return s.table }

// SchemaSQL returns the DDL that ApplySchema runs.
func (s *inboxStore) SchemaSQL() string { return s.schema }

// ApplySchema creates the inbox table and its indexes if they do not
// exist. It is idempotent and safe to run at every start.
func (s *inboxStore) ApplySchema(ctx context.Context) error {
	return s.shell.withSchemaLock(ctx, s.table, func(ddl ddlConn) error {
		if err := checkSession(ctx, ddl.conn, s.dialect); err != nil {
			return err
		}
		found, err := ddl.createAll(ctx, s.schema, "inbox schema", s.table, func() error {
			// The table may be one of the application's own, or the
			// outbox's, named by mistake.
			return checkTableShape(ctx, ddl.conn, s.dialect, s.table, "inbox", inboxColumns)
		})
		if err != nil {
			return err
		}
		return foreignObject(found, s.table)
	})
}

// CheckTable reports whether the store's table is an inbox table: nil
// then; a *core.ConfigError of field Table when the table exists but
// lacks an inbox table's columns (an outbox table, or one of the
// application's); the read's error when the table cannot be read. It
// only reads.
func (s *inboxStore) CheckTable(ctx context.Context) error {
	return checkTableShapeOn(ctx, s.db, s.dialect, s.table, "inbox", inboxColumns)
}

// IsContention reports whether err is lock contention (SQLite busy, MySQL
// deadlock or lock wait timeout): the transaction should be rolled back
// and run again.
func (s *inboxStore) IsContention(err error) bool {
	return err != nil && s.dialect.Classify(err) == ClassBusy
}

// renderInboxSchema executes the dialect's inbox DDL template for table.
func renderInboxSchema(d Dialect, table string) (string, error) {
	return renderTemplate(d, "inbox schema", d.InboxSchema(), table)
}

// inboxColumns are the columns every inbox read selects, in the order
// decodeInbox expects.
var inboxColumns = []string{
	"source", "message_id", "topic", "payload", "hash", "status", "attempt",
	"first_seen_at", "last_seen_at", "next_attempt_at", "due_at",
	"locked_by", "locked_until", "last_error",
}

var inboxTimeColumns = map[string]bool{
	"first_seen_at": true, "last_seen_at": true, "next_attempt_at": true, "due_at": true, "locked_until": true,
}

// inboxStatements holds the SQL of the fixed-shape inbox operations, built
// once per store. Statements whose key list varies are built by keyList.
type inboxStatements struct {
	cols string // the select list of inboxColumns
	// touch: source, message_id, topic, payload, hash, now (first seen),
	// now (last seen), now (next attempt), then for the conflict: now,
	// now + 1 µs (last seen when the row holds now already), hash.
	touch string
	// touchRead: source, message_id. A locking read where rows lock.
	touchRead string
	// markDone: now (last seen), source, message_id, the last seen time
	// Touch wrote.
	markDone string
	// doneCheck: source, message_id. One row while the message is Done.
	doneCheck string
	// markProcessed: source, message_id, payload (empty), now (first
	// seen), now (last seen), now (next attempt), then now (conflict).
	markProcessed string
	// enqueueRead: source, message_id (locking where rows lock).
	enqueueRead string
	// enqueueInsert: source, message_id, topic, payload, hash, now, now,
	// now (next attempt), due.
	enqueueInsert string
	// enqueueTouch (Done rows): last_seen, source, message_id.
	enqueueTouch string
	// enqueueUpdate (Processing, Dead): topic, payload, hash, due,
	// last_seen, source, message_id.
	enqueueUpdate string
	// enqueuePromote (Seen -> Processing): topic, payload, hash, due,
	// last_seen, next_attempt, source, message_id.
	enqueuePromote string
	// get: source, message_id.
	get string
	// claimable is the WHERE clause of claimable rows: now (next
	// attempt), now (due), now (lease expired).
	claimable string
	// claimReturning (RETURNING dialects): owner, locked_until, the
	// claimable arguments, limit. It charges the attempt (see claimSet).
	claimReturning string
	// claimSelect (SKIP LOCKED dialects): the claimable arguments, limit.
	claimSelect string
	// reap: now, limit. cleanup: cutoff, limit. With argTwice, their
	// first argument twice: now, now, limit and cutoff, cutoff, limit.
	reap, cleanup string
	argTwice      bool
}

// claimSet is the SET list of a claim: owner, locked_until. The claim
// charges the attempt: a handling whose process dies (or whose lease
// expires) has used it, and Release gives it back.
const claimSet = "locked_by = ?, locked_until = ?, attempt = attempt + 1"

// reapCleanupArgs returns the arguments of reap (first: now) or cleanup
// (first: the cutoff), as argTwice says.
func (q *inboxStatements) reapCleanupArgs(first any, limit int) []any {
	if q.argTwice {
		return []any{first, first, limit}
	}
	return []any{first, limit}
}

// lockingRead returns " FOR UPDATE" for dialects with row locks (the read
// then waits for, and sees, the latest committed row), "" for SQLite,
// whose writers are serialized anyway.
func lockingRead(d Dialect) string {
	if d.Capabilities().SkipLocked {
		return " FOR UPDATE"
	}
	return ""
}

func buildInboxStatements(d Dialect, table string) inboxStatements {
	t := d.QuoteIdent(table)
	st := func(s inboxrow.Status) string { return strconv.Itoa(int(s)) }
	cols := inboxColumns
	if ts, ok := d.(TimeSelector); ok {
		cols = make([]string, len(inboxColumns))
		for i, c := range inboxColumns {
			cols[i] = c
			if inboxTimeColumns[c] {
				cols[i] = ts.SelectTime(c)
			}
		}
	}
	sel := strings.Join(cols, ", ")
	key := " WHERE source = ? AND message_id = ?"
	insertCols := " (source, message_id, topic, payload, hash, first_seen_at, last_seen_at, status, attempt, next_attempt_at, due_at)"
	// ON CONFLICT … DO UPDATE (SQLite 3.24+, PostgreSQL) and ON DUPLICATE
	// KEY UPDATE both take the placeholders that follow; a column on the
	// right-hand side, qualified with the table name (PostgreSQL finds an
	// unqualified one ambiguous with EXCLUDED's), is the existing row's.
	upsert := " ON CONFLICT (source, message_id) DO UPDATE SET "
	existing := t + "."
	if d.Capabilities().OnDuplicateKeyUpdate {
		upsert = " ON DUPLICATE KEY UPDATE "
		existing = ""
	}
	order := " ORDER BY next_attempt_at, source, message_id"
	q := inboxStatements{
		cols: sel,
		// A delivery writes a last_seen_at the row did not hold (now, or
		// now + 1 µs when it held now already), so that the Done mark can
		// fence on it (see MarkDoneTx). NULLIF and COALESCE take their
		// type from the column where the database types placeholders.
		touch: "INSERT INTO " + t + insertCols + " VALUES (?, ?, ?, ?, ?, ?, ?, " + st(inboxrow.Seen) + ", 0, ?, NULL)" +
			upsert + "last_seen_at = COALESCE(NULLIF(?, " + existing + "last_seen_at), ?), hash = COALESCE(" + existing + "hash, ?)",
		touchRead: "SELECT status, attempt, hash, locked_by, " + timeSel(d, "locked_until") + ", " + timeSel(d, "last_seen_at") +
			" FROM " + t + key + lockingRead(d),
		markDone: "UPDATE " + t + " SET status = " + st(inboxrow.Done) + ", last_seen_at = ?, locked_by = NULL, locked_until = NULL" +
			key + " AND last_seen_at = ?",
		doneCheck: "SELECT 1 FROM " + t + key + " AND status = " + st(inboxrow.Done),
		markProcessed: "INSERT INTO " + t + insertCols + " VALUES (?, ?, '', ?, NULL, ?, ?, " + st(inboxrow.Done) + ", 0, ?, NULL)" +
			upsert + "status = " + st(inboxrow.Done) + ", last_seen_at = ?, locked_by = NULL, locked_until = NULL",
		enqueueRead:   "SELECT status, hash FROM " + t + key + lockingRead(d),
		enqueueInsert: "INSERT INTO " + t + insertCols + " VALUES (?, ?, ?, ?, ?, ?, ?, " + st(inboxrow.Processing) + ", 0, ?, ?)",
		enqueueTouch:  "UPDATE " + t + " SET last_seen_at = ?" + key,
		enqueueUpdate: "UPDATE " + t + " SET topic = ?, payload = ?, hash = ?, due_at = ?, last_seen_at = ?" + key,
		enqueuePromote: "UPDATE " + t + " SET topic = ?, payload = ?, hash = ?, due_at = ?, last_seen_at = ?, next_attempt_at = ?, status = " +
			st(inboxrow.Processing) + key,
		get: "SELECT " + sel + " FROM " + t + key,
		claimable: "status = " + st(inboxrow.Processing) + " AND next_attempt_at <= ? AND (due_at IS NULL OR due_at <= ?)" +
			" AND (locked_by IS NULL OR locked_until < ?)",
	}
	q.claimReturning = "UPDATE " + t + " SET " + claimSet + " WHERE (source, message_id) IN (SELECT source, message_id FROM " + t +
		" WHERE " + q.claimable + order + " LIMIT ?" + skipLocked(d) + ") RETURNING " + sel
	q.claimSelect = "SELECT " + sel + " FROM " + t + " WHERE " + q.claimable + order + " LIMIT ? FOR UPDATE SKIP LOCKED"
	expired := "status = " + st(inboxrow.Processing) + " AND locked_by IS NOT NULL AND locked_until < ?"
	old := "status = " + st(inboxrow.Done) + " AND last_seen_at < ?"
	switch {
	case d.Capabilities().UpdateOrderLimit:
		q.reap = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE " + expired + " LIMIT ?"
		q.cleanup = "DELETE FROM " + t + " WHERE " + old + " LIMIT ?"
	case d.Capabilities().SingleWriter: // nothing can change a row between the subquery and the statement
		q.reap = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE (source, message_id) IN (SELECT source, message_id FROM " + t +
			" WHERE " + expired + " LIMIT ?)"
		q.cleanup = "DELETE FROM " + t + " WHERE (source, message_id) IN (SELECT source, message_id FROM " + t + " WHERE " + old + " LIMIT ?)"
	default:
		// Each condition is stated again outside its subquery: a row the
		// subquery picked that another statement changed meanwhile (a
		// claim's new lease, a duplicate's touch of last_seen_at) is
		// re-read by the outer statement, which PostgreSQL rechecks
		// against its own WHERE only.
		q.reap = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE " + expired + " AND (source, message_id) IN (SELECT source, message_id FROM " + t +
			" WHERE " + expired + " LIMIT ?)"
		q.cleanup = "DELETE FROM " + t + " WHERE " + old + " AND (source, message_id) IN (SELECT source, message_id FROM " + t + " WHERE " + old + " LIMIT ?)"
		q.argTwice = true
	}
	bt := d.BindType()
	for _, p := range []*string{&q.touch, &q.touchRead, &q.markDone, &q.doneCheck, &q.markProcessed, &q.enqueueRead, &q.enqueueInsert,
		&q.enqueueTouch, &q.enqueueUpdate, &q.enqueuePromote, &q.get, &q.claimReturning, &q.claimSelect, &q.reap, &q.cleanup} {
		*p = sqlx.Rebind(bt, *p)
	}
	return q
}

// timeSel wraps a time column the way the dialect reads time columns.
func timeSel(d Dialect, col string) string {
	if ts, ok := d.(TimeSelector); ok {
		return ts.SelectTime(col)
	}
	return col
}

// maxInboxKeysPerStatement bounds the key list of one statement (two
// placeholders per key, far below every driver's limit).
const maxInboxKeysPerStatement = 256

// keyList returns prefix + a condition matching the n keys + suffix,
// rebound for the dialect. One key is written as two equalities, more as
// a row-value IN list; both use the primary key.
func keyList(d Dialect, prefix string, n int, suffix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	if n == 1 {
		b.WriteString("source = ? AND message_id = ?")
	} else {
		b.WriteString("(source, message_id) IN (")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?)")
		}
		b.WriteByte(')')
	}
	b.WriteString(suffix)
	return sqlx.Rebind(d.BindType(), b.String())
}

// keyArgs appends the source and message id of each key.
func keyArgs(args []any, keys []inboxrow.Key) []any {
	for _, k := range keys {
		args = append(args, k.Source, k.MessageID)
	}
	return args
}

// chunkKeys removes duplicate keys and cuts the rest into slices of at
// most maxInboxKeysPerStatement.
func chunkKeys(keys []inboxrow.Key) [][]inboxrow.Key {
	seen := make(map[inboxrow.Key]struct{}, len(keys))
	uniq := make([]inboxrow.Key, 0, len(keys))
	for _, k := range keys {
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			uniq = append(uniq, k)
		}
	}
	var out [][]inboxrow.Key
	for len(uniq) > 0 {
		n := min(len(uniq), maxInboxKeysPerStatement)
		out = append(out, uniq[:n:n])
		uniq = uniq[n:]
	}
	return out
}

// writeKeys runs fn for every chunk of keys and returns the rows changed:
// a single chunk as one autocommit statement (unless alwaysTx), several in
// one transaction, so a method call is atomic whatever the number of keys.
// Lock contention is retried until ctx ends.
func (s *inboxStore) writeKeys(ctx context.Context, keys []inboxrow.Key, alwaysTx bool,
	fn func(ex inboxrow.Tx, ks []inboxrow.Key) (int64, error)) (int64, error) {
	groups := chunkKeys(keys)
	switch {
	case len(groups) == 0:
		return 0, nil
	case len(groups) == 1 && !alwaysTx:
		return retryBusy(ctx, s.shell, func() (int64, error) { return fn(s.db, groups[0]) })
	}
	var total int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		total = 0
		for _, ks := range groups {
			n, err := fn(tx, ks)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

// execCount runs a statement on ex and returns the rows it changed.
func execCount(ctx context.Context, ex inboxrow.Tx, query string, args ...any) (int64, error) {
	res, err := ex.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// txOptions are the options of the store's own transactions: READ
// COMMITTED where rows lock, so a locking read of a missing key takes no
// gap lock (concurrent first inserts then meet on the key and one gets a
// duplicate instead of both deadlocking).
func (s *inboxStore) txOptions() *sql.TxOptions {
	if s.dialect.Capabilities().SkipLocked {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}

// inTx runs fn in a transaction of its own, retrying the whole
// transaction on lock contention until ctx ends.
func (s *inboxStore) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	return retryTx(ctx, s.shell, s.txOptions(), fn)
}

// execRC is exec for a write that scans rows others may hold locked (the
// reap of expired leases, the cleanup of old Done messages): where rows
// lock it runs in a READ COMMITTED transaction of its own, so that on
// MySQL/MariaDB it neither takes gap locks, which held up Enqueue's
// inserts, nor waits for a row another transaction holds whose
// committed version does not match (a handler's Process transaction on
// its message, under a live lease), which held up the reap, and with it
// the dispatcher's claims, for as long as that transaction ran.
func (s *inboxStore) execRC(ctx context.Context, query string, args ...any) (int64, error) {
	if s.txOptions() == nil {
		return s.exec(ctx, query, args...)
	}
	return execCommitted(ctx, s.shell, query, args...)
}

// exec runs one autocommit write, retrying lock contention, and returns
// the number of rows changed.
func (s *inboxStore) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := retryBusy(ctx, s.shell, func() (sql.Result, error) {
		return s.db.ExecContext(ctx, query, args...)
	})
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// opErr wraps an error of an inbox operation.
func opErr(op string, err error) error {
	return fmt.Errorf("outbox: jdbcstore: inbox %s: %w", op, err)
}

// encodeBytes returns b as a driver argument that is never NULL (drivers
// bind a nil []byte as NULL).
func encodeBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// encodeHash returns the hash argument: NULL when there is none.
func encodeHash(h []byte) any {
	if len(h) == 0 {
		return nil
	}
	return h
}

// encodeDue returns the due_at argument: NULL for the zero time.
func (s *inboxStore) encodeDue(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return s.dialect.EncodeTime(t)
}

// nullError stores "" as NULL and truncates the rest to MaxErrorLen.
func (s *inboxStore) nullError(msg string) any {
	if msg == "" {
		return nil
	}
	return truncateError(msg, s.maxErr)
}
