package txctx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ctxerr"
	"github.com/outbox-go/outbox/internal/sqldriver"
	"github.com/outbox-go/outbox/internal/txopts"
)

// Option configures a [Manager] (or an adopted transaction, see [Adopt]).
type Option func(*options)

type options = txopts.Options

// WithLogger sets the logger for panicking hooks and hooks registered too
// late. Defaults to [slog.Default]. A nil logger keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.Logger = l
		}
	}
}

// WithTxOptions sets the isolation level and read-only flag of the
// transactions begun by [Manager.Do]. Defaults to nil (the driver's
// defaults). What the driver does with them is the driver's: MySQL,
// MariaDB and PostgreSQL enforce ReadOnly, but mattn/go-sqlite3 ignores
// it (writes, and Publish, still commit).
func WithTxOptions(txOpts *sql.TxOptions) Option {
	return func(o *options) { o.TxOptions = txOpts }
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Manager begins transactions on one database and carries them in contexts.
// It is safe for concurrent use.
type Manager struct {
	db   *sqlx.DB
	opts options
}

// New returns a Manager for db. [Tx.Sqlx] binds parameters for the driver
// detected from db.Driver() (sqlite3, mysql, postgres, pgx, sqlite); use
// [NewX] to choose the sqlx driver name explicitly. For a nil db it
// returns a Manager whose [Manager.Do] fails with an error wrapping
// [core.ErrInvalidConfig].
func New(db *sql.DB, opts ...Option) *Manager {
	return &Manager{db: sqldriver.Wrap(db), opts: buildOptions(opts)}
}

// NewX returns a Manager for an sqlx database. A nil db, or an *sqlx.DB
// holding a nil *sql.DB (the zero sqlx.DB), is no database, as for [New]:
// [Manager.Do] fails with an error wrapping [core.ErrInvalidConfig].
func NewX(db *sqlx.DB, opts ...Option) *Manager {
	if db != nil && db.DB == nil {
		db = nil
	}
	return &Manager{db: db, opts: buildOptions(opts)}
}

// Do runs fn in a transaction carried by the context passed to fn (find it
// with [From] or [core.TxFromContext]).
//
// Do commits when fn returns nil and then runs the after-commit hooks. It
// rolls back, runs the after-rollback hooks and returns fn's error unchanged
// (joined with the rollback error if the rollback fails) when fn returns an
// error. If fn panics, Do rolls back, runs the after-rollback hooks and
// panics again with the same value. If ctx is done when fn returns nil, Do
// rolls back and returns an error wrapping ctx.Err(), as database/sql would.
// A failed commit is returned wrapped and runs the after-rollback hooks,
// never the after-commit hooks; so does a failed check registered with
// [Tx.BeforeCommit] (on MySQL/MariaDB, a transaction the server rolled back
// on its own, whose failed statement fn ignored, returns an error matching
// [core.ErrTxAborted]).
//
// ctx bounds the wait for a connection of the pool (and the dial of a new
// one) and the BEGIN: a ctx that ends meanwhile returns an error wrapping
// ctx.Err() without calling fn, as does a ctx done before Do begins. On
// SQLite a BEGIN IMMEDIATE waiting for another connection's write lock
// waits in SQLite's busy handler, which ctx cannot interrupt: up to the
// busy timeout (10 s with sqlite.Open); a Manager of outbox.New or
// tenant.New first lets the outbox's own pending writes go, for at most
// 100 ms. Once
// begun, the transaction is detached from ctx (as with
// [context.WithoutCancel]), so a cancelled ctx cannot race Do's own
// rollback; statements run by fn still use the ctx they are given. A
// statement interrupted by its ctx makes most drivers close the connection
// (go-sql-driver/mysql, pgx): the server then rolls the transaction back
// itself, and Do's rollback, finding the connection closed, reports an
// error joined to fn's (such as "outbox: rollback: context deadline
// exceeded"): nothing was committed all the same. The
// COMMIT and the ROLLBACK themselves take no context in database/sql:
// against a server that no longer answers they wait for the driver's own
// timeouts (on MySQL/MariaDB the DSN's readTimeout and writeTimeout; for
// PostgreSQL TCP keepalives or tcp_user_timeout), so Do returns past
// ctx's deadline when fn outran it (or failed without a statement closing
// the connection) while the server stopped answering: its rollback waits
// too, then its after-rollback hooks run, and Do returns.
//
// If ctx already carries an active transaction of this Manager's database
// (an outer Do, or [Manager.Adopt]), fn joins it: no new transaction is
// begun, fn's result is returned as is, and the outer owner decides whether
// to commit. If the outer fn ignores the inner error, the inner writes are
// committed with the rest; a panic in a joined fn rolls nothing back by
// itself either: it goes on to the outer fn (and, unrecovered, to the
// outer Do, which rolls back). If ctx carries an active transaction of another
// or unknown database, Do returns [ErrForeignTx] without calling fn.
func (m *Manager) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if ctx == nil { // before anything else: a nil ctx is always ErrNilContext
		return core.ErrNilContext
	}
	if m == nil || m.db == nil {
		return fmt.Errorf("%w: txctx: nil database", core.ErrInvalidConfig)
	}
	if fn == nil {
		return fmt.Errorf("%w: txctx: nil function", core.ErrInvalidConfig)
	}
	if outer, join, err := m.carried(ctx); err != nil {
		return err
	} else if join {
		return fn(withTx(ctx, outer))
	}

	if err := ctx.Err(); err != nil {
		// Done already: fn would run only to be rolled back.
		return fmt.Errorf("outbox: begin transaction: %w", err)
	}
	if m.opts.Yield != nil && m.opts.Yield() {
		runtime.Gosched()
	}
	if err := m.opts.Gate.Yield(ctx); err != nil {
		return fmt.Errorf("outbox: begin transaction: wait for the store's writes: %w", err)
	}
	txx, err := m.begin(ctx)
	if err != nil {
		return fmt.Errorf("outbox: begin transaction: %w", err)
	}
	t := newTx(txx.Tx, txx, m.db.DB, true, m.opts.Logger)

	returned := false
	defer func() {
		if returned {
			return
		}
		// fn panicked (or called runtime.Goexit): roll back, run the
		// rollback hooks, then let the panic continue.
		p := recover()
		if rbErr := t.rollback(); rbErr != nil && !errors.Is(rbErr, ErrTxDone) {
			t.logger.LogAttrs(context.Background(), slog.LevelError,
				"outbox: rollback after panic failed", slog.String("error", rbErr.Error()))
		}
		if p != nil {
			panic(p)
		}
	}()
	fnErr := fn(withTx(ctx, t))
	returned = true

	if fnErr != nil {
		if rbErr := t.rollback(); rbErr != nil {
			return errors.Join(fnErr, rbErr)
		}
		return fnErr
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		notCommitted := fmt.Errorf("outbox: context done before commit, rolled back: %w", ctxErr)
		if rbErr := t.rollback(); rbErr != nil {
			return errors.Join(notCommitted, rbErr)
		}
		return notCommitted
	}
	return t.commit(context.WithoutCancel(ctx))
}

// carried inspects the transaction already carried by ctx. join is true when
// Do must join it; err is ErrForeignTx when it belongs elsewhere.
func (m *Manager) carried(ctx context.Context) (outer *Tx, join bool, err error) {
	if t, ok := ctx.Value(txKey{}).(*Tx); ok && t != nil && t.Active() {
		if t.db == m.db.DB {
			return t, true, nil
		}
		return nil, false, ErrForeignTx
	}
	if ct, ok := core.TxFromContext(ctx); ok && ct.Active() {
		if t, ok := ct.(*Tx); ok && t.db == m.db.DB {
			return t, true, nil
		}
		return nil, false, ErrForeignTx
	}
	return nil, false, nil
}

// Adopt is the package-level [Adopt] for a transaction the caller began on
// this Manager's database: it uses the Manager's logger, and [Manager.Do]
// joins it. The caller must make sure tx really belongs to that database.
// A nil tx gives a Tx that is never active (see the package-level [Adopt]).
func (m *Manager) Adopt(ctx context.Context, tx *sql.Tx) (context.Context, *Tx) {
	t := newTx(tx, nil, m.sqlDB(), false, m.opts.Logger)
	t.adopted = ctx
	return withTx(ctx, t), t
}

// AdoptX is [Manager.Adopt] for an *sqlx.Tx; [Tx.Sqlx] returns tx.
func (m *Manager) AdoptX(ctx context.Context, tx *sqlx.Tx) (context.Context, *Tx) {
	t := newTx(sqlTxOf(tx), tx, m.sqlDB(), false, m.opts.Logger)
	t.adopted = ctx
	return withTx(ctx, t), t
}

func (m *Manager) sqlDB() *sql.DB {
	if m.db == nil {
		return nil
	}
	return m.db.DB
}

// begin begins a transaction that ctx cannot roll back once begun (see
// Do), while ctx still bounds the wait for a connection of the pool, the
// dial of a new one and the BEGIN itself: the transaction is begun with a
// context detached from ctx that ctx's end cancels until BeginTxx
// returns. When ctx ended meanwhile, database/sql rolls back what BeginTxx
// began, and begin returns ctx's error.
func (m *Manager) begin(ctx context.Context) (*sqlx.Tx, error) {
	if ctx.Done() == nil { // never cancelled (context.Background and the like)
		return m.db.BeginTxx(ctx, m.opts.TxOptions)
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	txx, err := m.db.BeginTxx(bctx, m.opts.TxOptions)
	if !stop() {
		// ctx ended during BeginTxx: a transaction it began is bound to
		// the cancelled bctx, which database/sql rolls back.
		if err == nil {
			_ = txx.Rollback() // ErrTxDone when database/sql did it first
		}
		return nil, ctxerr.Of(ctx)
	}
	return txx, err
}
