package jdbcstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/writegate"
)

// Store is the SQL implementation of [core.Store]. It is safe for
// concurrent use. Create it with [New].
type Store struct {
	// noOpenCheck is set once the server turned out to have no
	// @@in_transaction (MySQL, as opposed to MariaDB): checkOpen is off.
	noOpenCheck atomic.Bool
	db          *sqlx.DB
	dialect     Dialect
	table       string
	maxErr      int
	now         func() time.Time
	log         *slog.Logger
	schema      string
	q           statements
	gate        *writegate.Gate // SQLite: one writer at a time, in Go
	// keys remembers the ordering keys' last positions committed here
	// (keyCache): from New with a keys table, on a single-writer database
	// once ApplySchema installed a schema that refuses stale positions.
	keys atomic.Pointer[keyCache]
	// pinPending: claims and polls name the pending index (SQLite), set
	// once ApplySchema installed a schema that has it or the first use
	// found it (checkPins).
	pinPending atomic.Bool
	// pinDead: dead-letter lists name the dead index (SQLite), set as
	// pinPending is.
	pinDead atomic.Bool
	// pinOrder: ClaimNext names the order index (SQLite), set as
	// pinPending is.
	pinOrder atomic.Bool
	// deadTypeHint: the clause naming the index of a dead-letter list
	// filtered by type (DeadTypeHinter), once checkPins found the index.
	deadTypeHint atomic.Pointer[string]
	// keyIDs: ordered inserts record and read the keys table's event ids
	// (byID), set once ApplySchema found or added the columns, or a claim
	// found them (checkKeyIDs, which last looked at keyIDsChecked, in
	// Unix nanoseconds).
	keyIDs        atomic.Bool
	keyIDsChecked atomic.Int64
	// shapeChecked: the table turned out to be an outbox table (CheckTable,
	// or ApplySchema), which Purge asks before it deletes anything.
	shapeChecked atomic.Bool
	// pinsKnown: pinPending, pinDead, pinOrder and deadTypeHint are settled; pinMu
	// serializes the lookup that settles them.
	pinsKnown atomic.Bool
	pinMu     sync.Mutex
	// batchSQL caches the multi-row insert of n rows (int → string).
	batchSQL sync.Map

	// busyHook, when set (by tests), is called before each wait of the
	// busy retry loop.
	busyHook func(attempt int, err error)
	// deadPageHook, when set (by tests), is called by ReplayDead and
	// DiscardDead between the read of a batch and its write.
	deadPageHook func(page []DeadSummary)
	// purgeHooks, when set (by tests), observe Purge.
	purgeHooks *purgeHooks
}

var _ core.Store = (*Store)(nil)

// New returns a Store over db configured by cfg. It validates cfg and
// renders the SQL but does not touch the database: call
// [Store.ApplySchema] to create the table.
//
// Errors wrap [core.ErrInvalidConfig] (see [core.ConfigError]; for a
// driver without a registered dialect also [ErrUnsupportedDriver]) or,
// for a bad table name, [core.ErrInvalidIdentifier].
func New(db *sqlx.DB, cfg Config) (*Store, error) {
	cfg, err := cfg.resolve(db)
	if err != nil {
		return nil, err
	}
	schema, err := renderSchema(cfg.Dialect, cfg.Table)
	if err != nil {
		return nil, err
	}
	s := &Store{
		db:      db,
		dialect: cfg.Dialect,
		table:   cfg.Table,
		maxErr:  cfg.MaxErrorLen,
		now:     cfg.Now,
		log:     cfg.Logger,
		schema:  schema,
		q:       buildStatements(cfg.Dialect, cfg.Table),
		gate:    gateFor(db, cfg.Dialect),
	}
	if s.q.lastOfKey == "" {
		// Positions come from the keys table's upsert, which vouches for
		// the remembered ones; on a single-writer database ApplySchema
		// starts the cache once the schema's trigger is there.
		s.keys.Store(newKeyCache())
	}
	return s, nil
}

// Table returns the outbox table name.
func (s *Store) Table() string { return s.table }

// Dialect returns the store's dialect.
func (s *Store) Dialect() Dialect { return s.dialect }

// DB returns the database the store was created with.
func (s *Store) DB() *sqlx.DB { return s.db }

// Insert stores env with status NEW, attempts 0, created_at =
// Config.Now(), available_at = env.NotBefore() or now (whichever is later)
// and the given lease (unowned when zero) on ex, normally the caller's
// business transaction (*sql.Tx, *sqlx.Tx or a core.Tx). The row exists
// only if that transaction commits. An unowned insert on a dialect that
// implements [Notifier] also announces the event on ex, so the pollers of
// every node wake up when ex commits.
//
// env is validated first. A duplicate event id returns an error wrapping
// [core.ErrDuplicateEvent]; on a database whose failed statements abort
// the transaction (PostgreSQL) the duplicate is detected without an
// error, so the caller's transaction stays usable. Lock contention is
// retried only when ex is the store's own database (an autocommit
// insert); inside a transaction the caller owns the retry.
func (s *Store) Insert(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if env.OrderKey() != "" {
		_, err := s.InsertOrdered(ctx, ex, env, lease) // which checks ctx as below
		return err
	}
	if err := ctxDone(ctx, "insert"); err != nil {
		return err
	}
	return s.insert(ctx, ex, env, lease, 0)
}

// insert is Insert; seq is the event's position in its key (ordered
// events only).
func (s *Store) insert(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease, seq int64) error {
	// The transaction must be the store's own before any statement runs
	// on it (the open check queries it): a statement on another
	// database's transaction could abort it (PostgreSQL) or fail there.
	if err := s.checkExecer(ex, env.ID()); err != nil {
		return err
	}
	if err := s.checkOpen(ctx, ex, env.ID()); err != nil {
		return err
	}
	_, err := s.insertRow(ctx, ex, env, lease, seq, 0)
	if err == nil {
		s.checkBeforeCommit(ex, env.ID())
	}
	return err
}

// insertRow inserts env's row (its callers then register the check
// before commit, checkBeforeCommit, once the row is sure to stay). With
// ifFree > 0 (an ordered event whose
// lease is set, at position seq = ifFree+1) the row takes lease only when
// the event at position ifFree of its key no longer holds the key, in the
// same statement; otherwise it is inserted without an owner by a second
// statement. It reports whether the row took lease.
func (s *Store) insertRow(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease, seq, ifFree int64) (bool, error) {
	args, err := s.rowArgs(env, lease, seq)
	if err != nil {
		return false, err
	}
	return s.insertRowArgs(ctx, ex, env, lease, args, ifFree, false)
}

// argPos is the index of order_seq among rowValues' arguments.
const argPos = 14

// insertRowArgs is insertRow with the arguments rowArgs returned. byID:
// the event took its position with nextSeqByID, and the check of the
// event before reads it by the id the keys row recorded.
func (s *Store) insertRowArgs(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease, args []any, ifFree int64, byID bool) (bool, error) {
	key := env.OrderKey()
	owned := s.ownsExecer(ex)
	if ifFree > 0 && !lease.IsZero() && key != "" {
		query, more := s.q.insertIfFree, []any{key, ifFree}
		if byID {
			query, more = s.q.insertIfFreeByID, []any{key, key}
		}
		n, err := s.execInsert(ctx, ex, owned, env.ID(), query, append(args, more...)...)
		if err != nil {
			return false, err
		}
		if n == 1 {
			return true, nil
		}
		// The event before still holds the key (or, where duplicates are
		// not errors, the id exists: the plain insert below says which).
		// Wait for the poller, behind it.
		args[11], args[12] = nil, nil
		lease = core.Lease{}
	}
	n, err := s.execInsert(ctx, ex, owned, env.ID(), s.q.insert, args...)
	if err != nil {
		return false, err
	}
	if n == 0 {
		// INSERT ... ON CONFLICT DO NOTHING: no row means the id exists.
		return false, fmt.Errorf("outbox: jdbcstore: insert %q: %w (the transaction is still usable)", env.ID(), core.ErrDuplicateEvent)
	}
	if lease.IsZero() {
		// Wake the pollers of every node once this transaction commits:
		// no hot path delivers an unowned event.
		if err := s.announce(ctx, ex); err != nil {
			return false, fmt.Errorf("outbox: jdbcstore: insert %q: notify: %w", env.ID(), err)
		}
	}
	return !lease.IsZero(), nil
}

// rowArgs checks env and returns the arguments of the insert statement
// for env's row: owned by lease (unowned when zero), at position seq of
// its key when it is ordered. The callers have checked the transaction
// (checkExecer) before any statement.
func (s *Store) rowArgs(env core.Envelope, lease core.Lease, seq int64) ([]any, error) {
	if err := env.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: insert: %w", err)
	}
	return s.rowValues(make([]any, 0, insertArgs+2), env, lease, seq, s.now()) // room for insertIfFree's two more
}

// checkExecer refuses a nil ex and a transaction of another database
// than the store's (when ex tells its database); id names the event in
// the error.
func (s *Store) checkExecer(ex core.Execer, id string) error {
	if ex == nil {
		return fmt.Errorf("outbox: jdbcstore: insert: %w", core.ErrNoTransaction)
	}
	if td, ok := ex.(core.TxDatabase); ok {
		if db := td.Database(); db != nil && db != s.db.DB {
			return fmt.Errorf("outbox: jdbcstore: insert %q into %s: %w", id, s.table, core.ErrForeignTx)
		}
	}
	return nil
}

// lastStorableTime is the last microsecond of the years core allows for
// the times of an event, which every supported database stores.
var lastStorableTime = time.Date(core.MaxTimeYear, 12, 31, 23, 59, 59, 999999000, time.UTC)

// firstStorableTime is the first instant of those years.
var firstStorableTime = time.Date(core.MinTimeYear, 1, 1, 0, 0, 0, 0, time.UTC)

// rowValues appends to args the insertColumns values of env's row, a
// valid envelope, created at now: owned by lease (unowned when zero), at
// position seq of its key when it is ordered.
func (s *Store) rowValues(args []any, env core.Envelope, lease core.Lease, seq int64, now time.Time) ([]any, error) {
	headers, err := core.EncodeHeaders(env.RawHeaders())
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: insert %q: %w", env.ID(), err)
	}
	payload, err := s.dialect.EncodePayload(env.PayloadKind(), env.RawPayload())
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: insert %q: encode payload: %w", env.ID(), err)
	}
	due := now
	if nb := env.NotBefore(); nb.After(due) {
		due = nb
	}
	var lockedBy, lockedUntil any
	if !lease.IsZero() {
		if err := validOwner(lease.Owner); err != nil {
			return nil, fmt.Errorf("outbox: jdbcstore: insert %q: %w", env.ID(), err)
		}
		until := lease.Until
		if until.After(lastStorableTime) {
			// The lease of an event due at the end of the range core
			// allows (a NotBefore late in core.MaxTimeYear) ends past
			// what a MySQL DATETIME holds: it ends with the range.
			until = lastStorableTime
		}
		lockedBy, lockedUntil = lease.Owner, s.dialect.EncodeTime(until)
	}
	var key, pos, skip any = nil, nil, 0
	if k := env.OrderKey(); k != "" {
		key, pos = k, seq
		if env.OnDead() == core.SkipOnDead {
			skip = 1
		}
	}
	return append(args,
		env.ID(), env.Type(),
		nullString(env.AggregateType()), nullString(env.AggregateID()), nullString(env.TenantID()),
		s.dialect.EncodeTime(env.OccurredAt()),
		payload, int64(env.PayloadKind()), nullString(headers),
		s.dialect.EncodeTime(due), s.dialect.EncodeTime(now), lockedBy, lockedUntil,
		key, pos, skip,
	), nil
}

// execInsert runs one insert statement and returns the rows it inserted
// (1 where the row count is not checked: a database whose duplicates are
// errors). owned says ex is the store's own database: the statement then
// takes the write gate and is retried on lock contention.
func (s *Store) execInsert(ctx context.Context, ex core.Execer, owned bool, id, query string, args ...any) (int64, error) {
	exec := func() (sql.Result, error) { return ex.ExecContext(ctx, query, args...) }
	var res sql.Result
	var err error
	if owned {
		var release func()
		if ctx, release, err = s.gate.Acquire(ctx); err != nil {
			return 0, s.mapError("insert", id, err)
		}
		defer release()
		res, err = retryBusy(ctx, s, exec)
	} else {
		res, err = exec()
	}
	if err != nil {
		return 0, s.abortedNote(ex, s.mapError("insert", id, err))
	}
	if query == s.q.insert && !s.dialect.Capabilities().FailedStatementAbortsTx {
		return 1, nil // a duplicate id was an error
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.mapError("insert", id, err)
	}
	return n, nil
}

// SilentRollback reports whether the store's database may roll a
// transaction back on its own and still let its COMMIT succeed (MySQL,
// MariaDB). It implements [core.SilentRollbacker]: on such a database the
// hot path is only used for transactions that implement
// [core.CommitChecker] (txctx's do).
func (s *Store) SilentRollback() bool { return s.dialect.Capabilities().SilentRollback }

// rowQuerier runs a query returning at most one row (*sql.Tx, *sqlx.Tx and
// txctx's Tx do).
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkBeforeCommit makes a transaction that can run checks before commit
// verify, on a database that may roll back silently, that the first event
// this store inserted on it is still there: if the server rolled the
// transaction back after a statement the business code ignored, the
// commit fails with core.ErrTxAborted instead of succeeding on nothing
// and delivering an event that does not exist. One check per transaction
// and store: a later event could have been inserted in autocommit mode
// after the rollback, the first one cannot. The check costs a round trip,
// so it is skipped for a transaction that saw every statement succeed
// (core.StatementWatcher).
func (s *Store) checkBeforeCommit(ex core.Execer, id string) {
	if !s.dialect.Capabilities().SilentRollback {
		return
	}
	cc, ok := ex.(core.CommitChecker)
	if !ok {
		return
	}
	q, ok := ex.(rowQuerier)
	if !ok {
		return
	}
	cc.BeforeCommit(s, func(ctx context.Context) error {
		if w, ok := ex.(core.StatementWatcher); ok && !w.MayHaveFailed() {
			return nil // no statement failed: the server cannot have rolled back
		}
		var one int
		err := q.QueryRowContext(ctx, s.q.exists, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			// Gone from a transaction still open: rolled back to a
			// savepoint (the outbox then reads back after commit which
			// events are stored), but only if the transaction may have
			// done so; else the server rolled the transaction back and
			// a statement after it began another (MariaDB's SET
			// autocommit = 0, after a deadlock met reading a query's
			// rows, which the transaction did not see).
			if s.undoneBySavepoint(ctx, ex, q) {
				return nil
			}
			return fmt.Errorf("outbox: jdbcstore: event %q is no longer in %s: %w", id, s.table, core.ErrTxAborted)
		}
		if err != nil {
			return fmt.Errorf("outbox: jdbcstore: check event %q before commit: %w", id, err)
		}
		return nil
	})
}

// checkOpen refuses, with core.ErrTxAborted, to add an event to ex when
// the server has ended that transaction on its own: on MariaDB, after a
// statement of it failed (a deadlock, a lock wait timeout with
// innodb_rollback_on_timeout, both of which roll the whole transaction
// back) the session goes on in autocommit mode, so the event's insert
// would commit at once, without the business writes rolled back before
// it, and the check before commit would find the row. It asks, with one
// SELECT @@in_transaction, when ex may have failed (core.StatementWatcher)
// or cannot tell (a plain *sql.Tx or *sqlx.Tx: no check before its
// commit either); MySQL has no such variable, and after the first answer
// saying so the store asks no more.
func (s *Store) checkOpen(ctx context.Context, ex core.Execer, id string) error {
	if !s.dialect.Capabilities().SilentRollback || s.noOpenCheck.Load() || s.ownsExecer(ex) {
		return nil
	}
	if w, ok := ex.(core.StatementWatcher); ok && !w.MayHaveFailed() {
		return nil
	}
	q, ok := ex.(rowQuerier)
	if !ok {
		return nil
	}
	open, known, err := s.inTransaction(ctx, q)
	if err != nil {
		return fmt.Errorf("outbox: jdbcstore: insert %q: check the transaction is open: %w", id, err)
	}
	if known && !open {
		return fmt.Errorf("outbox: jdbcstore: insert %q: %w: the database ended the transaction before this event "+
			"(an earlier statement failed, a deadlock or lock wait timeout ignored, or committed it implicitly: DDL, LOCK TABLES?); nothing was written", id, core.ErrTxAborted)
	}
	return nil
}

// inTransaction asks the server whether q's transaction is open
// (MariaDB's @@in_transaction). After a rollback of the server's own the
// session goes on in autocommit mode: not open. known is false on MySQL,
// which has no such variable; after its first answer saying so the store
// asks no more.
func (s *Store) inTransaction(ctx context.Context, q rowQuerier) (open, known bool, err error) {
	if s.noOpenCheck.Load() {
		return false, false, nil
	}
	var n int
	if err := q.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&n); err != nil {
		if unknownVariable(err) {
			s.noOpenCheck.Store(true) // MySQL: no such variable
			return false, false, nil
		}
		return false, false, err
	}
	return n == 1, true, nil
}

// undoneBySavepoint reports, for a row ex wrote that a check before
// commit found gone, whether a rollback to a savepoint explains it: ex
// says rows may have been undone so (core.SavepointWatcher) and its
// transaction is still open (MariaDB's @@in_transaction, read on q). Else
// the server rolled the transaction back on its own, and a statement
// after it may have begun another.
func (s *Store) undoneBySavepoint(ctx context.Context, ex any, q rowQuerier) bool {
	w, ok := ex.(core.SavepointWatcher)
	if !ok || !w.RowsMayBeUndone() {
		return false
	}
	open, known, err := s.inTransaction(ctx, q)
	return err == nil && known && open
}

// unknownVariable reports whether err is MySQL's answer to a query of
// @@in_transaction, a variable only MariaDB has: "Error 1193 (HY000):
// Unknown system variable 'in_transaction'". Any other failure (another
// server's error, a broken connection) must not turn the check off for
// good.
func unknownVariable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "1193") && strings.Contains(msg, "Unknown system variable") &&
		strings.Contains(msg, "in_transaction")
}

// ownsExecer reports whether ex is the store's own pool, so a failed
// statement ran in autocommit mode and can be retried as a whole.
func (s *Store) ownsExecer(ex core.Execer) bool {
	switch ex := ex.(type) {
	case *sqlx.DB:
		return ex == s.db
	case *sql.DB:
		return ex == s.db.DB
	}
	return false
}

// MarkDone sets the given events DONE with done_at = Config.Now() and
// releases their leases, for those that owner holds and that are not DONE
// yet. It returns how many rows changed: fewer than len(ids) means the
// rest are DONE already, missing, or owned by another node (fenced off).
func (s *Store) MarkDone(ctx context.Context, owner string, ids []string) (int64, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := validOwner(owner); err != nil {
		return 0, fmt.Errorf("outbox: jdbcstore: mark done: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.execByIDs(ids, []any{s.dialect.EncodeTime(s.now())}, []any{owner}, func(page []string, args []any) (int64, error) {
		query := s.q.markDone1
		if len(page) > 1 {
			query = inList(s.dialect, s.q.markDonePrefix, len(page), s.q.markDoneSuffix)
		}
		return s.exec(ctx, "mark done", page[0], query, args...)
	})
	if c := s.keys.Load(); c != nil && err == nil && n == int64(len(ids)) {
		c.done(ids)
	}
	return n, err
}

// bindLimit is the most placeholders one statement may have: the
// dialect's Capabilities.MaxBindParams, or defaultMaxBindParams when it
// does not say.
func (s *Store) bindLimit() int {
	if limit := s.dialect.Capabilities().MaxBindParams; limit > 0 {
		return limit
	}
	return defaultMaxBindParams
}

// execByIDs runs one statement per page of ids, each page as many ids as
// fit beside the arguments head (before them) and tail (after): every id
// in one statement unless the dialect takes fewer placeholders. run gets
// a page and its arguments and returns the rows it changed; execByIDs
// returns their sum, stopping at the first error.
func (s *Store) execByIDs(ids []string, head, tail []any, run func(page []string, args []any) (int64, error)) (int64, error) {
	var n int64
	for page := range slices.Chunk(ids, max(1, s.bindLimit()-len(head)-len(tail))) {
		args := make([]any, 0, len(head)+len(page)+len(tail))
		args = append(args, head...)
		for _, id := range page {
			args = append(args, id)
		}
		m, err := run(page, append(args, tail...))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// MarkRetry sets the event RETRY, increments attempts, sets available_at
// to nextAt, keeps owner's lease until leaseUntil and sets last_error to
// errMsg truncated to Config.MaxErrorLen characters. It changes nothing
// (returns false) when the event is DONE or owner does not hold it.
func (s *Store) MarkRetry(ctx context.Context, owner, id string, nextAt, leaseUntil time.Time, errMsg string) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if err := validOwner(owner); err != nil {
		return false, fmt.Errorf("outbox: jdbcstore: mark retry: %w", err)
	}
	n, err := s.exec(ctx, "mark retry", id, s.q.markRetry,
		s.dialect.EncodeTime(nextAt), s.dialect.EncodeTime(leaseUntil), truncateError(errMsg, s.maxErr), id, owner)
	return n > 0, err
}

// MarkDead sets the event DEAD, increments attempts (so a DEAD row counts
// every failed delivery), sets done_at to when it finished (retention
// purges DEAD rows by it), releases the lease and sets last_error to errMsg
// truncated to Config.MaxErrorLen characters. It changes nothing (returns
// false) when the event is DONE or owner does not hold it.
func (s *Store) MarkDead(ctx context.Context, owner, id, errMsg string) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if err := validOwner(owner); err != nil {
		return false, fmt.Errorf("outbox: jdbcstore: mark dead: %w", err)
	}
	n, err := s.exec(ctx, "mark dead", id, s.q.markDead,
		s.dialect.EncodeTime(s.now()), truncateError(errMsg, s.maxErr), id, owner)
	return n > 0, err
}

// Postpone implements core.Postponer: it sets available_at to nextAt and
// last_error to errMsg (truncated to Config.MaxErrorLen characters) and
// releases the lease, keeping status and attempts. It changes nothing
// (returns false) when the event is DONE or owner does not hold it.
func (s *Store) Postpone(ctx context.Context, owner, id string, nextAt time.Time, errMsg string) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if err := validOwner(owner); err != nil {
		return false, fmt.Errorf("outbox: jdbcstore: postpone: %w", err)
	}
	n, err := s.exec(ctx, "postpone", id, s.q.postpone,
		s.dialect.EncodeTime(nextAt), truncateError(errMsg, s.maxErr), id, owner)
	return n > 0, err
}

var _ core.Postponer = (*Store)(nil)

// ReleaseLeases clears the lease of every NEW or RETRY row that owner
// holds, except the rows whose ids are in exceptIDs, and returns how many
// rows it released. DONE and DEAD rows and other owners' rows are never
// changed. The dispatcher calls it when it closes (see
// core.LeaseReleaser), so another node, or this process restarted, takes
// over the events it did not deliver without waiting for their leases to
// expire; on a database that announces commits (PostgreSQL, see
// Notifier) it wakes the other nodes' pollers when it released any.
// exceptIDs is bound as one placeholder per id: keep it to a few
// thousand ids at most.
func (s *Store) ReleaseLeases(ctx context.Context, owner string, exceptIDs []string) (int64, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := validOwner(owner); err != nil {
		return 0, fmt.Errorf("outbox: jdbcstore: release leases: %w", err)
	}
	query := s.q.release
	if len(exceptIDs) > 0 {
		query = inList(s.dialect, s.q.releaseExceptPrefix, len(exceptIDs), ")")
	}
	args := make([]any, 0, len(exceptIDs)+1)
	args = append(args, owner)
	for _, id := range exceptIDs {
		args = append(args, id)
	}
	n, err := s.execRC(ctx, "release leases", query, args...)
	if err == nil && n > 0 {
		// The released rows are free for any node: wake them (see
		// Notifier). Polling remains the backstop should this fail.
		if aerr := s.announce(ctx, s.db); aerr != nil {
			s.log.Debug("outbox: jdbcstore: could not announce released leases; other nodes take them at their next poll",
				slog.String("error", aerr.Error()))
		}
	}
	return n, err
}

var _ core.LeaseReleaser = (*Store)(nil)

// ExtendLeases sets locked_until to until on the NEW or RETRY rows of ids
// that owner holds and returns how many changed: the dispatcher keeps the
// lease of an event whose listener hung alive while the call runs, and
// renews that of an event whose lease became too short to run on while it
// waited for a worker (see core.LeaseExtender). Other owners' rows and
// DONE or DEAD rows are never changed.
func (s *Store) ExtendLeases(ctx context.Context, owner string, ids []string, until time.Time) (int64, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := validOwner(owner); err != nil {
		return 0, fmt.Errorf("outbox: jdbcstore: extend leases: %w", err)
	}
	return s.execByIDs(ids, []any{s.dialect.EncodeTime(until), owner}, nil, func(page []string, args []any) (int64, error) {
		return s.exec(ctx, "extend leases", page[0], inList(s.dialect, s.q.extendPrefix, len(page), ")"), args...)
	})
}

var _ core.LeaseExtender = (*Store)(nil)

// validOwner checks an owner token against the locked_by column.
func validOwner(owner string) error {
	if owner == "" || len(owner) > core.MaxOwnerLen {
		return &core.ConfigError{Field: "owner", Msg: fmt.Sprintf("must be 1 to %d bytes", core.MaxOwnerLen)}
	}
	return nil
}

// exec runs a write on the store's pool, retrying lock contention until
// ctx ends, and returns how many rows changed.
func (s *Store) exec(ctx context.Context, op, id, query string, args ...any) (int64, error) {
	ctx, release, err := s.gate.Acquire(ctx)
	if err != nil {
		return 0, s.mapError(op, id, err)
	}
	defer release()
	res, err := retryBusy(ctx, s, func() (sql.Result, error) {
		return s.db.ExecContext(ctx, query, args...)
	})
	if err != nil {
		return 0, s.mapError(op, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.mapError(op, id, err)
	}
	return n, nil
}

// execRC is exec for a write that reads a range of pending rows to change
// some of them (a node's release of its own leases):
// where rows lock it runs in a READ COMMITTED transaction of its own
// (execCommitted), so on MySQL/MariaDB it neither takes gap locks, which
// held up the business transactions' inserts, nor waits for a row it
// does not change that a business transaction holds (an event it
// published and has not committed, the event before an ordered one it
// published), which held the statement up as long as that transaction
// ran, and deadlocked a transaction publishing on several keys. The
// purge's deletes run so too, for the transaction (see purger.delete).
func (s *Store) execRC(ctx context.Context, op, query string, args ...any) (int64, error) {
	if !s.dialect.Capabilities().SkipLocked {
		return s.exec(ctx, op, "", query, args...)
	}
	n, err := execCommitted(ctx, s, query, args...)
	if err != nil {
		return 0, s.mapError(op, "", err)
	}
	return n, nil
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// gateFor returns the write gate of db for a single-writer dialect, or nil.
func gateFor(db *sqlx.DB, d Dialect) *writegate.Gate {
	if !d.Capabilities().SingleWriter {
		return nil
	}
	return writegate.For(db.DB)
}
