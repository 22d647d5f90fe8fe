package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/ctxerr"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/inboxrow"
	"github.com/outbox-go/outbox/internal/ratelog"
	"github.com/outbox-go/outbox/internal/sqldriver"
	"github.com/outbox-go/outbox/internal/txend"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/retry"
)

// Defaults of [Config] and of the maintenance operations.
const (
	// DefaultTable is the inbox table name.
	DefaultTable = "inbox_message"
	// reapBatch is the most leases ReapExpired releases per statement.
	reapBatch = 500
)

// Config configures [New]. The zero value works with the default table on
// a database whose driver is detected (sqlite3, mysql, pgx).
type Config struct {
	// Table is the inbox table name; it must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,47}$ and not be one SQLite reserves
	// (see jdbcstore.ValidateTableName).
	// Defaults to DefaultTable ("inbox_message").
	Table string
	// Dialect selects the SQL dialect. Defaults to the one matching the
	// driver name of db.
	Dialect jdbcstore.Dialect
	// MaxErrorLen is how many characters of an error are stored in
	// last_error. Defaults to jdbcstore.DefaultMaxErrorLen; at most
	// jdbcstore.MaxMaxErrorLen.
	MaxErrorLen int
	// SkipSchema leaves the schema alone; by default New applies
	// the embedded, idempotent schema (CREATE … IF NOT EXISTS).
	SkipSchema bool
	// Backoff is the delay before the next attempt of an abandoned
	// message, given its attempt count after the abandon. Defaults to
	// [Backoff]: min(2^attempt s, 60 s). A nil value of a policy type
	// (retry.PolicyFunc(nil)) is refused, and so is a policy whose Validate
	// method reports a problem (a retry.Exponential with a negative delay);
	// a policy that panics gets retry.Exponential{}'s delay for that
	// attempt.
	Backoff retry.Policy
	// Logger receives the inbox's logs; payloads are never logged.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock of every stored time (first/last seen, leases, next
	// attempts, cleanup cutoffs): the application's clock, as in the
	// outbox store, not the database server's. Nodes sharing a table need
	// synchronized clocks (leases compare them). Defaults to time.Now.
	Now func() time.Time
	// Observer traces and measures each ProcessTx and Process (for
	// example *otel.Observer or *prometheus.Collector of this repository's
	// modules), and is the default of DispatcherConfig.Observer for
	// [Inbox.NewDispatcher]. nil observes nothing.
	Observer core.InboxObserver
}

// Validate reports every invalid field of c at once: each problem is a
// *core.ConfigError (wrapping core.ErrInvalidConfig) naming its field
// ("Table", which also wraps core.ErrInvalidIdentifier), joined with
// errors.Join. The dialect is not checked: it depends on the database
// handle. New runs it before it touches the database; tenant.NewInbox
// runs it before it opens any, naming the fields "Inbox.Table".
func (c Config) Validate() error {
	table := c.Table
	if table == "" {
		table = DefaultTable
	}
	return errors.Join(jdbcstore.Config{Table: table, MaxErrorLen: c.MaxErrorLen, Logger: c.Logger}.Validate(), c.nilValueErrors())
}

// nilValueErrors reports a Backoff or an Observer that is a nil value of
// a pointer type (nil itself means the default, or none).
func (c Config) nilValueErrors() error {
	var p cfgpath.Collector
	p.NilValue("Backoff", c.Backoff)
	p.Validated("Backoff", c.Backoff)
	p.NilValue("Observer", c.Observer)
	return p.Err()
}

// Inbox is the idempotent receiver over one table. It offers two ways to
// process inbound messages exactly once in effect:
//
//   - transactional: [Inbox.ProcessTx] (or [Inbox.Process]) records the
//     message inside the consumer's own transaction, runs the business
//     code in it and marks the message Done in it, so the effect and the
//     mark commit together;
//   - work queue: [Inbox.Enqueue] stores the message, and a [Dispatcher]
//     claims it with a lease and runs the topic's [Handler], with retries,
//     backoff and a dead state (or do it by hand with Claim, Ack, Abandon,
//     Fail and ReapExpired).
//
// Create it with [New]. It is safe for concurrent use.
type Inbox struct {
	store   inboxrow.Store
	db      *sqlx.DB
	backoff retry.Policy
	now     func() time.Time
	log     *slog.Logger
	baseLog *slog.Logger // Config.Logger, the default of DispatcherConfig.Logger
	obs     core.InboxObserver
	// observerLog limits the lines about the Observer's panics.
	observerLog *ratelog.Limiter

	mu      sync.Mutex
	members map[*member]struct{} // dispatchers' members to notify after an enqueue
}

// New returns an inbox on db, the handle the application already has: a
// *sql.DB (its driver is detected: go-sql-driver/mysql, mattn go-sqlite3
// or pgx) or a *sqlx.DB. A nil handle is refused first; then an undetected
// driver and every problem of cfg (see [Config.Validate]) are reported at
// once, joined. Unless cfg.SkipSchema, it then creates its table.
// Configuration errors wrap core.ErrInvalidConfig or, for a bad table
// name, core.ErrInvalidIdentifier as well; a nil ctx is refused with
// core.ErrNilContext.
func New[DB *sql.DB | *sqlx.DB](ctx context.Context, handle DB, cfg Config) (*Inbox, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	db := sqldriver.Of(handle)
	badValues := cfg.nilValueErrors()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Backoff == nil {
		cfg.Backoff = Backoff{}
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	o := inboxrow.Options{Table: cfg.Table, MaxErrorLen: cfg.MaxErrorLen, Now: cfg.Now, Logger: cfg.Logger}
	if cfg.Dialect != nil {
		o.Dialect = cfg.Dialect
	}
	store, err := inboxrow.Open(db, o)
	if err != nil || badValues != nil {
		return nil, errors.Join(err, badValues)
	}
	if !cfg.SkipSchema {
		if err := store.ApplySchema(ctx); err != nil {
			return nil, err
		}
	}
	return &Inbox{
		store:   store,
		db:      db,
		backoff: cfg.Backoff,
		now:     cfg.Now,
		log:     cfg.Logger.With(slog.String("component", "outbox.inbox")),
		baseLog: cfg.Logger,
		obs:     cfg.Observer,

		observerLog: ratelog.New(5 * time.Second),
	}, nil
}

// DB returns the database the inbox works on: begin the transaction for
// [Inbox.ProcessTx] on it (with package tenant, it is the tenant's
// database).
func (in *Inbox) DB() *sqlx.DB { return in.db }

// Table returns the name of the inbox table, for queries of your own.
func (in *Inbox) Table() string { return in.store.Table() }

// SchemaSQL returns the table's DDL, for migration tools.
func (in *Inbox) SchemaSQL() string { return in.store.SchemaSQL() }

// ApplySchema creates the inbox table and its indexes if they do not
// exist, as [New] does unless Config.SkipSchema. It is idempotent. An
// existing table that lacks an inbox table's columns (one of the
// application's tables, or an outbox table, named by mistake) is refused
// with a *core.ConfigError of field Table, and nothing is written.
func (in *Inbox) ApplySchema(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	return in.store.ApplySchema(ctx)
}

// CheckTable reports whether the inbox's table is an inbox table, as a
// tool that only reads the table (Config.SkipSchema) may want to know
// before it starts: nil then; a *core.ConfigError of field Table (wrapping
// core.ErrInvalidConfig) when the table exists but lacks an inbox table's
// columns (an outbox table, or one of the application's, named by
// mistake); the read's error when the table cannot be read (it does not
// exist, say). It only reads.
func (in *Inbox) CheckTable(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	return in.store.CheckTable(ctx)
}

// IsContention reports whether err is lock contention (SQLite busy,
// MySQL/MariaDB deadlock or lock wait timeout): the transaction should be
// rolled back and run again. Errors of this package already wrap
// [ErrContention] then; IsContention also recognizes the driver's own
// error, as the Commit of a transaction given to [Inbox.ProcessTx]
// returns it.
func (in *Inbox) IsContention(err error) bool {
	return errors.Is(err, ErrContention) || err != nil && in.store.IsContention(err)
}

// ProcessTx processes msg at most once, inside tx, the caller's business
// transaction: it records the delivery of (msg.Source, msg.MessageID) on
// tx, and
//
//   - if the message is Done already, returns (false, nil) without
//     calling fn: a redelivery;
//   - if a work-queue worker holds a live lease on it, returns an error
//     wrapping ErrInProgress without calling fn, unless ctx is (derived
//     from) the context a [Dispatcher] gave the handler of this very
//     message in this table under the claim that holds the lease, and
//     the call goes through the handler's Inbox (see [FromContext]) or
//     another on the same *sql.DB handle and table (a handle of its own
//     on the same database is not recognised: ErrInProgress): that
//     lease is the caller's own (a handler that outlived its lease, whose
//     message was claimed again, by its own dispatcher or another, gets
//     ErrInProgress);
//   - otherwise (new, or Seen, or Processing without a live lease or
//     under the calling handler's, or Dead) calls fn(ctx); when fn
//     succeeds, marks the message Done on tx (releasing any lease) and
//     returns (true, nil). fn's error is returned as is.
//
// So a handler that must have its effect once calls ProcessTx (or
// Process) with its ctx and its own message (Source and MessageID of the
// Record it got): the effect and the Done mark commit together, a
// redelivery or a retry after a crash finds the message Done, and the
// dispatcher's acknowledgement then has nothing left to do. If the
// handler returns an error before its transaction committed, the attempt
// fails as usual.
//
// fn does its business writes on tx. The caller commits tx when ProcessTx
// returns a nil error and rolls it back otherwise: the effect and the Done
// mark then commit together or not at all. A rolled-back transaction
// leaves no trace of the delivery, so a later redelivery processes the
// message again.
//
// Concurrent deliveries of the same message never both run fn: the
// delivery is recorded with an upsert that locks the row until tx ends.
// On MySQL/MariaDB a concurrent ProcessTx waits for tx, then
// sees the message Done; on SQLite, transactions that write are serialized
// (open the database with sqlite.Open, whose transactions begin
// IMMEDIATE). A deadlock or lock timeout comes back wrapping ErrContention:
// roll back and try again ([Inbox.Process] does).
//
// A database may roll tx back on its own and let the connection carry on
// in autocommit mode: MySQL/MariaDB after a deadlock or a lock wait
// timeout, SQLite after some I/O errors. If fn ignored the failed statement
// and returned nil, the Done mark finds the row no longer holding this
// delivery, writes nothing, and ProcessTx returns an error wrapping
// core.ErrTxAborted: roll back and deliver again. On MySQL/MariaDB a tx
// that can check before its commit (a core.CommitChecker, as txctx's
// transactions) also checks there that the message is still Done, so a
// rollback the server did later in the transaction fails the commit with
// core.ErrTxAborted instead of letting it succeed on nothing. A ROLLBACK
// TO SAVEPOINT of a savepoint set before ProcessTx undoes the mark with
// the rest of what came after the savepoint, on every database: the
// transaction commits what it kept, and the message is processed again
// when it comes again (on MySQL/MariaDB, tell the two apart: run the
// rollback through a txctx transaction's own methods, or on its raw
// transaction, as an ORM does).
//
// Every delivery updates last_seen_at, and so does the Done mark (so the
// cleanup retention counts from the last sighting or the completion,
// whichever came later). A hash differing from the stored one is logged
// as a warning, never an error. msg.Topic and msg.Payload are
// optional here (stored for inspection; a nil payload is stored empty).
//
// tx must be a transaction: a database handle (*sql.DB, *sql.Conn,
// *sqlx.DB, *sqlx.Conn: anything with a BeginTx method), a nil one of any
// type, a txctx transaction that is no longer active and a transaction
// that has ended (committed or rolled back: the error also wraps
// sql.ErrTxDone) return an error wrapping core.ErrNoTransaction without
// calling fn; so does a transaction fn ended itself, after fn.
//
// tx must also be a transaction of the inbox's database: begun on
// [Inbox.DB] or on your own handle of the same database. ProcessTx cannot
// tell another database's transaction apart: given one, it records the
// message and its Done mark in that database (in its table of the same
// name, or fails when there is none), where this inbox never looks, so a
// redelivery through this inbox processes the message again. With
// package tenant, use the transaction of the tenant's own database.
func (in *Inbox) ProcessTx(ctx context.Context, tx Tx, msg Message, fn func(ctx context.Context) error) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if _, handle := tx.(beginner); handle {
		return false, fmt.Errorf("outbox: inbox: process: %w: pass the business transaction, not a database handle (%T)", core.ErrNoTransaction, tx)
	}
	if noTx(tx) {
		return false, fmt.Errorf("outbox: inbox: process: %w", core.ErrNoTransaction)
	}
	if fn == nil {
		return false, &core.ConfigError{Field: "fn", Msg: "must not be nil"}
	}
	if err := checkMessage(msg, false); err != nil {
		return false, err
	}
	return in.observed(ctx, msg, nil, func(ctx context.Context, run *fnRun) (bool, error) {
		return in.processTx(ctx, tx, msg, fn, run)
	})
}

// observed runs process, the processing of msg in the transactional mode,
// under the observer if there is one: run receives whether the business
// function ran and how long (nil without an observer). The processing's
// outcome is what process returns; Process includes its commit in it.
// retried, when not nil, tells whether the caller runs a failed
// processing again (Process, after lock contention): that one is reported
// as core.InboxRetry, not failed.
func (in *Inbox) observed(ctx context.Context, msg Message, retried func(error) bool, process func(ctx context.Context, run *fnRun) (bool, error)) (bool, error) {
	if in.obs == nil {
		return process(ctx, nil)
	}
	ctx, end := observeInbox(ctx, in.obs, core.InboxMessage{
		Source: msg.Source, MessageID: msg.MessageID, Topic: msg.Topic, Mode: core.InboxTransactional,
	}, in.log, in.observerLog)
	var run fnRun
	returned := false
	defer func() {
		if !returned {
			// fn panicked or called runtime.Goexit: the observation still
			// ends (its span, its count), and the panic goes on untouched.
			end(core.InboxResult{Outcome: core.InboxFailed, Err: errFnAbandoned, Took: run.took, NotRun: !run.ran})
		}
	}()
	processed, err := process(ctx, &run)
	returned = true
	r := core.InboxResult{Outcome: core.InboxDuplicate, Took: run.took, NotRun: !run.ran}
	switch {
	case err != nil && retried != nil && retried(err):
		r.Outcome, r.Err = core.InboxRetry, err
	case err != nil:
		r.Outcome, r.Err = core.InboxFailed, err
	case processed:
		r.Outcome = core.InboxProcessed
	}
	end(r)
	return processed, err
}

// noTx reports whether tx is no transaction to write on: nil, a nil
// pointer (a nil *sql.Tx passed as a Tx), an *sqlx.Tx wrapping none, or a
// core.Tx (txctx's) that is no longer active.
func noTx(tx Tx) bool {
	if tx == nil {
		return true
	}
	if v := reflect.ValueOf(tx); v.Kind() == reflect.Pointer && v.IsNil() {
		return true
	}
	switch t := tx.(type) {
	case *sqlx.Tx:
		return t.Tx == nil
	case core.Tx:
		return !t.Active()
	}
	return false
}

// fnRun tells an observer whether a business function ran, and how long.
type fnRun struct {
	ran  bool
	took time.Duration
}

// processTx is ProcessTx after the checks; run, when not nil, receives
// whether fn ran and how long.
func (in *Inbox) processTx(ctx context.Context, tx Tx, msg Message, fn func(ctx context.Context) error, run *fnRun) (bool, error) {
	t, err := in.store.Touch(ctx, tx, inboxrow.Message(msg))
	if err != nil {
		return false, txEnded(in.mapErr(err))
	}
	in.warnMismatch(ctx, t.HashMismatch, msg.Key())
	h := ownHandling(ctx, in, msg.Key())
	switch {
	case Status(t.Status) == StatusDone:
		in.log.LogAttrs(ctx, slog.LevelDebug, "inbox: already processed; skipped", keyAttrs(msg.Key())...)
		return false, nil
	case Status(t.Status) == StatusProcessing && t.LockedBy != "" && !in.now().After(t.LockedUntil) &&
		(h == nil || !h.holds(t.LockedBy, t.LockedUntil)): // another claim's lease, not the calling handler's
		return false, fmt.Errorf("%w (source %q, message id %q, until %s)", ErrInProgress, msg.Source, msg.MessageID,
			t.LockedUntil.Format(time.RFC3339Nano))
	}
	in.log.LogAttrs(ctx, slog.LevelDebug, "inbox: processing", append(keyAttrs(msg.Key()), slog.String("status", Status(t.Status).String()))...)
	err = runFn(ctx, fn, run)
	if err != nil {
		return false, err
	}
	if err := in.store.MarkDoneTx(ctx, tx, inboxrow.Key(msg.Key()), t.LastSeenAt); err != nil {
		return false, txEnded(in.mapErr(err))
	}
	if h != nil {
		h.marked.Store(true)
	}
	return true, nil
}

// runFn calls fn and, when run is not nil, records in it that fn ran and
// how long, also when fn panics or calls runtime.Goexit.
func runFn(ctx context.Context, fn func(ctx context.Context) error, run *fnRun) error {
	if run != nil {
		start := time.Now()
		run.ran = true
		defer func() { run.took = time.Since(start) }()
	}
	return fn(ctx)
}

// beginner is a database handle, which begins transactions and is none:
// *sql.DB, *sql.Conn, *sqlx.DB, *sqlx.Conn. On a handle each statement
// commits on its own, so no row lock would hold a concurrent redelivery
// back until the effect commits.
type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// txEnded marks the error of a statement on the caller's transaction
// that had ended (sql.ErrTxDone: committed or rolled back before
// ProcessTx, or by fn) with core.ErrNoTransaction, as for an ended txctx
// transaction; errors.Is matches both.
func txEnded(err error) error {
	if marked := txend.Mark(err); marked != err {
		return fmt.Errorf("outbox: inbox: process: %w", marked)
	}
	return err
}

// Process runs [Inbox.ProcessTx] in a transaction of its own on the
// inbox's database: fn gets that transaction for its business writes. It
// commits when fn succeeds and rolls back otherwise, and runs the whole
// transaction again on lock contention (with a short jittered pause) until
// ctx ends. fn may therefore run more than once, but only one run's writes
// ever commit; fn must write only through tx. An error from the commit
// itself (the connection cut while its answer was on the way) leaves the
// outcome unknown: the message and its effect may have committed. Deliver
// it again: Process then returns false, nil if they had.
func (in *Inbox) Process(ctx context.Context, msg Message, fn func(ctx context.Context, tx *sqlx.Tx) error) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if fn == nil {
		return false, &core.ConfigError{Field: "fn", Msg: "must not be nil"}
	}
	if err := checkMessage(msg, false); err != nil {
		return false, err
	}
	pause := time.Millisecond
	for {
		processed, err := in.processOnce(ctx, msg, fn)
		if err == nil || !errors.Is(err, ErrContention) {
			return processed, err
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("%w (gave up: %w)", err, ctxerr.Of(ctx))
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

func (in *Inbox) processOnce(ctx context.Context, msg Message, fn func(ctx context.Context, tx *sqlx.Tx) error) (bool, error) {
	tx, err := in.db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("outbox: inbox: process: begin: %w", in.mapErr(err))
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	// The commit is part of the observed processing: the message is
	// processed only once it commits. Lock contention makes Process run
	// it again (unless ctx ended): that round is reported as a retry.
	retried := func(err error) bool { return errors.Is(err, ErrContention) && ctx.Err() == nil }
	return in.observed(ctx, msg, retried, func(ctx context.Context, run *fnRun) (bool, error) {
		processed, err := in.processTx(ctx, tx, msg, func(ctx context.Context) error { return fn(ctx, tx) }, run)
		if err != nil {
			return false, in.mapErr(err)
		}
		if err := tx.Commit(); err != nil {
			return false, fmt.Errorf("outbox: inbox: process: commit: %w", in.mapErr(ctxerr.OfCommit(ctx, err)))
		}
		return processed, nil
	})
}

// AlreadyProcessed records a delivery of (source, messageID) and reports
// whether the message is Done: an unknown message is
// inserted as Seen and false is returned; a known one gets last_seen_at =
// now, and a hash is stored if none was. It runs in a transaction of its
// own. Use it with MarkProcessed when the processing cannot share a
// transaction with the inbox; otherwise ProcessTx is the safe choice.
func (in *Inbox) AlreadyProcessed(ctx context.Context, source, messageID string, hash []byte) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if err := checkKey(source, messageID); err != nil {
		return false, err
	}
	if err := checkHash(hash); err != nil {
		return false, err
	}
	k := Key{Source: source, MessageID: messageID}
	t, err := in.store.AlreadyProcessed(ctx, inboxrow.Key(k), hash)
	if err != nil {
		return false, in.mapErr(err)
	}
	in.warnMismatch(ctx, t.HashMismatch, k)
	done := Status(t.Status) == StatusDone
	in.log.LogAttrs(ctx, slog.LevelDebug, "inbox: deduplication check", append(keyAttrs(k), slog.Bool("already_processed", done))...)
	return done, nil
}

// MarkProcessed sets the message Done (recording it as Done when it is
// unknown) and releases any lease. It is idempotent.
func (in *Inbox) MarkProcessed(ctx context.Context, source, messageID string) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if err := checkKey(source, messageID); err != nil {
		return err
	}
	return in.mapErr(in.store.MarkProcessed(ctx, inboxrow.Key{Source: source, MessageID: messageID}))
}

// Enqueue stores msg for the work queue. Source,
// MessageID and Topic are required (at most 255 characters each), Payload
// must not be nil (empty is fine; it is never interpreted) and at most
// MaxPayloadBytes (ErrPayloadTooLarge), DueAt defers the first claim (zero
// or past: claimable at once) and lies within the years core.MinTimeYear
// to core.MaxTimeYear in UTC (ErrDueAtOutOfRange).
//
// It is an upsert: a new message is stored Processing with attempt 0; a
// Done message keeps its state (only its last sighting is recorded); a
// Seen message becomes Processing; a Processing or Dead one takes the new
// topic, payload, hash and due time and keeps its state. A hash differing
// from the stored one is logged as a warning. Dispatchers of this Inbox
// are woken to claim it at once, or at its DueAt when that is later.
//
// Enqueue writes in a transaction of its own: it does not join a
// transaction ctx carries (as the outbox's Publish does), so a message
// enqueued inside a business transaction that rolls back stays. Enqueue
// once that transaction has committed; on SQLite, one enqueued inside a
// transaction of the same database waits for its write lock until the
// busy timeout, whatever ctx says.
func (in *Inbox) Enqueue(ctx context.Context, msg Message) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if err := checkMessage(msg, true); err != nil {
		return err
	}
	res, err := in.store.Enqueue(ctx, inboxrow.Message(msg))
	if err != nil {
		return in.mapErr(err)
	}
	in.warnMismatch(ctx, res.HashMismatch, msg.Key())
	in.log.LogAttrs(ctx, slog.LevelDebug, "inbox: enqueued", append(keyAttrs(msg.Key()), slog.String("topic", msg.Topic),
		slog.Bool("new", res.Inserted), slog.String("status", Status(res.Status).String()))...)
	if Status(res.Status) == StatusProcessing {
		in.wake()
		if wait := msg.DueAt.Sub(in.now()); !msg.DueAt.IsZero() && wait > 0 {
			in.wakeAt(time.Now().Add(wait))
		}
	}
	return nil
}

// Claim leases up to batchSize claimable messages to owner for lease and
// returns them: Processing, due, next attempt not
// in the future, and not leased (or the lease expired). Concurrent
// claimers never get the same message. owner must be non-empty (at most
// MaxOwnerLen bytes) and should stay the same for a worker's lifetime.
//
// Each claim charges its message an attempt (Record.Attempt counts it:
// 1 on the first claim): a handling that ends without an outcome, because
// its process died or its lease expired, has used it. Release gives it
// back; Ack, Abandon and Fail keep it.
//
// Ack, Release, Abandon, AbandonAfter and Fail are fenced on the owner
// token: they act on the message while owner holds its lease, whichever of
// owner's claims took it. A worker of your own whose handling of a message
// may outlive its lease must not claim again under the same owner while
// that handling may still record an outcome, or the outcome would settle
// the new claim. A [Dispatcher] fences its own writes on the claim itself.
func (in *Inbox) Claim(ctx context.Context, owner string, lease time.Duration, batchSize int) ([]Record, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	if err := checkPositive("lease", lease, ErrInvalidLease); err != nil {
		return nil, err
	}
	if err := checkBatch(batchSize); err != nil {
		return nil, err
	}
	rows, err := in.store.Claim(ctx, owner, lease, batchSize)
	if err != nil {
		return nil, in.mapErr(err)
	}
	if len(rows) == 0 { // an idle poll logs nothing
		return nil, nil
	}
	in.log.LogAttrs(ctx, slog.LevelDebug, "inbox: claimed", slog.String("owner", owner), slog.Int("messages", len(rows)))
	recs := make([]Record, len(rows))
	for i, r := range rows {
		recs[i] = fromRow(r)
	}
	return recs, nil
}

// Ack marks the messages Done (LastSeenAt = now, from which Cleanup
// counts their retention) and releases their leases, for those owner
// holds. Unknown keys, other owners' messages and duplicate
// keys are ignored; no keys is a no-op. It returns how many changed.
//
// Every key is checked first, on every database alike: one that is not a
// valid key (an empty, too long or invalid source or message id: not
// UTF-8, or holding NUL) refuses the whole call with its sentinel
// (ErrEmptySource, ErrEmptyMessageID, ErrSourceTooLong,
// ErrMessageIDTooLong or ErrInvalidText) in a *core.ValidationError whose
// Field names the key ("keys[2].source"), and nothing is written. Such a
// key cannot be stored, so it is no unknown key. The same holds for
// Release, Abandon, AbandonAfter and Fail.
func (in *Inbox) Ack(ctx context.Context, owner string, keys []Key) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	if err := checkKeys(keys); err != nil {
		return 0, err
	}
	return in.ack(ctx, inboxrow.Lease{Owner: owner}, keys)
}

// ack is Ack fenced on a lease: the dispatcher's claim.
func (in *Inbox) ack(ctx context.Context, l inboxrow.Lease, keys []Key) (int, error) {
	n, err := in.store.Ack(ctx, l, rowKeys(keys))
	return int(n), in.mapErr(err)
}

// Release hands back owner's leases on the messages and the attempts
// their claims charged: they are claimable again at once (by any
// dispatcher), subject to their next attempt and due times. Messages owner
// does not hold are ignored. It returns how many changed. A Dispatcher
// calls it for the messages whose handlers a shutdown interrupted. A key
// that is not valid refuses the whole call, writing nothing (see Ack).
func (in *Inbox) Release(ctx context.Context, owner string, keys []Key) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	if err := checkKeys(keys); err != nil {
		return 0, err
	}
	return in.release(ctx, inboxrow.Lease{Owner: owner}, keys)
}

// release is Release fenced on a lease: the dispatcher's claim.
func (in *Inbox) release(ctx context.Context, l inboxrow.Lease, keys []Key) (int, error) {
	n, err := in.store.Release(ctx, l, rowKeys(keys))
	return int(n), in.mapErr(err)
}

// Abandon releases owner's leases on the messages and makes them
// claimable again after Config.Backoff of their attempt count (by default
// min(2^attempt s, 60 s)), recording lastError ("" records none). The
// attempt was charged by the claim. Messages owner does not hold are
// ignored. It returns how many changed. A key that is not valid refuses
// the whole call, writing nothing (see Ack).
func (in *Inbox) Abandon(ctx context.Context, owner string, keys []Key, lastError string) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	if err := checkKeys(keys); err != nil {
		return 0, err
	}
	return in.abandon(ctx, inboxrow.Lease{Owner: owner}, keys, lastError, func(a int) time.Duration { return engine.Delay(in.backoff, a) })
}

// AbandonAfter is Abandon with a fixed delay instead of the backoff;
// delay must be positive. A key that is not valid refuses the whole call,
// writing nothing (see Ack).
func (in *Inbox) AbandonAfter(ctx context.Context, owner string, keys []Key, lastError string, delay time.Duration) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	if err := checkPositive("delay", delay, ErrInvalidDelay); err != nil {
		return 0, err
	}
	if err := checkKeys(keys); err != nil {
		return 0, err
	}
	return in.abandon(ctx, inboxrow.Lease{Owner: owner}, keys, lastError, func(int) time.Duration { return delay })
}

// abandon is Abandon fenced on l with the delay of each message given its
// attempt count; a negative delay counts as 0. The dispatcher calls it
// with its claim and the delay of its retry policy.
func (in *Inbox) abandon(ctx context.Context, l inboxrow.Lease, keys []Key, lastError string, delay func(attempt int) time.Duration) (int, error) {
	n, err := in.store.Abandon(ctx, l, rowKeys(keys), lastError, delay)
	return int(n), in.mapErr(err)
}

// Fail marks the messages Dead (LastSeenAt = now) and records errMsg, for
// those owner holds; the attempt their claim charged counts. Dead messages
// are never claimed again. It returns how many changed. A key that is not
// valid refuses the whole call, writing nothing (see Ack).
func (in *Inbox) Fail(ctx context.Context, owner string, keys []Key, errMsg string) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	if err := checkKeys(keys); err != nil {
		return 0, err
	}
	return in.fail(ctx, inboxrow.Lease{Owner: owner}, keys, errMsg, false)
}

// fail is Fail fenced on l; refund gives the claim's attempt back (the
// dispatcher's claim that found the attempts used up ran no handler).
func (in *Inbox) fail(ctx context.Context, l inboxrow.Lease, keys []Key, errMsg string, refund bool) (int, error) {
	n, err := in.store.Fail(ctx, l, rowKeys(keys), errMsg, refund)
	return int(n), in.mapErr(err)
}

// ReapExpired releases every expired lease of a Processing message, in
// batches, and returns how many. The messages become
// claimable again, subject to their next attempt time; the attempt their
// claim charged stays charged (the handling ended without an outcome: its
// process died, or it outlived its lease). A Dispatcher does this every
// ReapInterval.
func (in *Inbox) ReapExpired(ctx context.Context) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	total := 0
	for {
		n, err := in.store.ReapExpired(ctx, reapBatch)
		total += int(n)
		if err != nil {
			return total, in.mapErr(err)
		}
		if n < reapBatch {
			return total, nil
		}
	}
}

// Get returns the stored message, or an error wrapping ErrNotFound.
func (in *Inbox) Get(ctx context.Context, source, messageID string) (Record, error) {
	if ctx == nil {
		return Record{}, core.ErrNilContext
	}
	if err := checkKey(source, messageID); err != nil {
		return Record{}, err
	}
	row, err := in.store.Get(ctx, inboxrow.Key{Source: source, MessageID: messageID})
	switch {
	case errors.Is(err, core.ErrNotFound):
		return Record{}, fmt.Errorf("%w (source %q, message id %q)", ErrNotFound, source, messageID)
	case err != nil:
		return Record{}, in.mapErr(err)
	}
	return fromRow(row), nil
}

// Cleanup deletes Done messages whose last sighting or completion,
// whichever came later (Record.LastSeenAt), is more than retention ago, at
// most batchSize rows per statement, and returns how many. Seen,
// Processing and Dead messages are never deleted. Once deleted, a
// message is new again to the inbox: keep retention longer than any
// sender's redelivery window.
func (in *Inbox) Cleanup(ctx context.Context, retention time.Duration, batchSize int) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if err := checkPositive("retention", retention, ErrInvalidRetention); err != nil {
		return 0, err
	}
	if err := checkBatch(batchSize); err != nil {
		return 0, err
	}
	n, err := in.store.Cleanup(ctx, retention, batchSize)
	return int(n), in.mapErr(err)
}

// mapErr marks lock contention with ErrContention.
func (in *Inbox) mapErr(err error) error {
	if err == nil || errors.Is(err, ErrContention) || !in.store.IsContention(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrContention, err)
}

// warnMismatch logs a redelivery whose hash differs from the stored one.
// The hashes themselves are not logged.
func (in *Inbox) warnMismatch(ctx context.Context, mismatch bool, k Key) {
	if mismatch {
		in.log.LogAttrs(ctx, slog.LevelWarn, "inbox: redelivered message has a different content hash than the stored one",
			keyAttrs(k)...)
	}
}

// register makes Enqueue notify a dispatcher's member.
func (in *Inbox) register(m *member) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.members == nil {
		in.members = map[*member]struct{}{}
	}
	in.members[m] = struct{}{}
}

// unregister undoes register.
func (in *Inbox) unregister(m *member) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.members, m)
}

// wake tells every dispatcher of this inbox that a message was enqueued.
// It never blocks.
func (in *Inbox) wake() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for m := range in.members {
		m.notify()
	}
}

// wakeAt tells every dispatcher of this inbox that a message enqueued
// becomes due at the wall-clock time at. It never blocks.
func (in *Inbox) wakeAt(at time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for m := range in.members {
		m.notifyAt(at)
	}
}

func keyAttrs(k Key) []slog.Attr {
	return []slog.Attr{slog.String("source", k.Source), slog.String("message_id", k.MessageID)}
}

// fromRow converts a stored row to a Record. (The types differ in Status
// only, so a struct conversion does not apply.)
func fromRow(r inboxrow.Record) Record {
	next := r.NextAttemptAt
	if r.DueAt.After(next) {
		next = r.DueAt // no claim before it either
	}
	return Record{
		Source: r.Source, MessageID: r.MessageID, Topic: r.Topic, Payload: r.Payload, Hash: r.Hash,
		Status: Status(r.Status), Attempt: r.Attempt, FirstSeenAt: r.FirstSeenAt, LastSeenAt: r.LastSeenAt,
		NextAttemptAt: next, DueAt: r.DueAt, LockedBy: r.LockedBy, LockedUntil: r.LockedUntil,
		LastError: r.LastError, DecodeErr: r.DecodeErr,
	}
}

// rowKeys converts keys for the store; the common single key of a
// dispatcher's outcome costs one small allocation, as the caller's slice
// did.
func rowKeys(keys []Key) []inboxrow.Key {
	if len(keys) == 0 {
		return nil
	}
	out := make([]inboxrow.Key, len(keys))
	for i, k := range keys {
		out[i] = inboxrow.Key(k)
	}
	return out
}
