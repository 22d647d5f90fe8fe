package txctx

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// Context keys are unexported types so no other package can collide with them.
type txKey struct{}

type txState uint8

const (
	stateActive     txState = iota
	stateFinishing          // Commit or Rollback in progress: no more hooks
	stateCommitted          // committed; after-commit hooks ran or are running
	stateRolledBack         // rolled back or commit failed
)

func (s txState) String() string {
	switch s {
	case stateActive:
		return "active"
	case stateFinishing:
		return "finishing"
	case stateCommitted:
		return "committed"
	default:
		return "rolled back"
	}
}

const (
	hookAfterCommit   = "after_commit"
	hookAfterRollback = "after_rollback"
)

// Tx is a database transaction with after-commit and after-rollback hooks.
// It implements [core.Tx]. A Tx comes from [Manager.Do] (then the Manager
// commits or rolls it back) or from [Adopt], [AdoptX], [Manager.Adopt] or
// [Manager.AdoptX] (then the caller commits or rolls back through it).
//
// All methods are safe for concurrent use; the statements themselves follow
// the rules of [sql.Tx].
type Tx struct {
	tx      *sql.Tx
	txx     *sqlx.Tx // nil when adopted from a plain *sql.Tx
	db      *sql.DB  // owning database; nil when unknown (package-level Adopt)
	managed bool     // owned by Manager.Do
	logger  *slog.Logger

	mu            sync.Mutex
	state         txState
	afterCommit   []func()
	afterRollback []func()
}

var _ core.Tx = (*Tx)(nil)

func newTx(tx *sql.Tx, txx *sqlx.Tx, db *sql.DB, managed bool, logger *slog.Logger) *Tx {
	return &Tx{tx: tx, txx: txx, db: db, managed: managed, logger: logger}
}

// ExecContext runs a statement on the transaction. It implements [core.Execer].
func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, q, args...)
}

// QueryContext runs a query on the transaction.
func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs a query expected to return at most one row on the
// transaction.
func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, q, args...)
}

// SQL returns the underlying *sql.Tx. Do not commit or roll it back
// directly: hooks only run when the transaction ends through this package.
func (t *Tx) SQL() *sql.Tx { return t.tx }

// Sqlx returns the underlying *sqlx.Tx, or nil for a transaction adopted
// from a plain *sql.Tx with [Adopt] or [Manager.Adopt]. The same rule as
// for [Tx.SQL] applies.
func (t *Tx) Sqlx() *sqlx.Tx { return t.txx }

// Active reports whether the transaction can still be written to and accept
// hooks. It is false once Commit or Rollback has started, whether or not
// it succeeded.
func (t *Tx) Active() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == stateActive
}

// AfterCommit registers fn to run once, only after the transaction commits
// successfully. Hooks run in registration order after the commit, outside any
// lock; a panic in fn is recovered and logged. On a transaction that is no
// longer active it does nothing and logs a warning. A nil fn is ignored.
func (t *Tx) AfterCommit(fn func()) { t.register(hookAfterCommit, fn) }

// AfterRollback registers fn to run once, only after the transaction rolls
// back: explicitly, because the function given to [Manager.Do] failed or
// panicked, or because the commit failed. Otherwise it behaves like
// [Tx.AfterCommit].
func (t *Tx) AfterRollback(fn func()) { t.register(hookAfterRollback, fn) }

func (t *Tx) register(kind string, fn func()) {
	if fn == nil {
		return
	}
	t.mu.Lock()
	state := t.state
	if state == stateActive {
		if kind == hookAfterCommit {
			t.afterCommit = append(t.afterCommit, fn)
		} else {
			t.afterRollback = append(t.afterRollback, fn)
		}
	}
	t.mu.Unlock()
	if state != stateActive {
		t.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"outbox: hook registered on a finished transaction is ignored",
			slog.String("hook", kind), slog.String("tx_state", state.String()))
	}
}

// Commit commits an adopted transaction, then runs the after-commit hooks.
// If the commit fails, the error is returned wrapped and the after-rollback
// hooks run instead. A second Commit or Rollback returns [ErrTxDone]; on a
// transaction owned by [Manager.Do] it returns [ErrManagedTx].
func (t *Tx) Commit() error {
	if t.managed {
		return ErrManagedTx
	}
	return t.commit()
}

// Rollback rolls back an adopted transaction, then runs the after-rollback
// hooks (also when the rollback itself reports an error, since the
// transaction did not commit). A second Commit or Rollback returns
// [ErrTxDone]; on a transaction owned by [Manager.Do] it returns
// [ErrManagedTx].
func (t *Tx) Rollback() error {
	if t.managed {
		return ErrManagedTx
	}
	return t.rollback()
}

// finish moves an active transaction to stateFinishing and hands out its
// hooks. ok is false when the transaction was already finishing or done.
func (t *Tx) finish() (commitHooks, rollbackHooks []func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != stateActive {
		return nil, nil, false
	}
	t.state = stateFinishing
	commitHooks, rollbackHooks = t.afterCommit, t.afterRollback
	t.afterCommit, t.afterRollback = nil, nil
	return commitHooks, rollbackHooks, true
}

func (t *Tx) setState(s txState) {
	t.mu.Lock()
	t.state = s
	t.mu.Unlock()
}

func (t *Tx) commit() error {
	commitHooks, rollbackHooks, ok := t.finish()
	if !ok {
		return ErrTxDone
	}
	if err := t.tx.Commit(); err != nil {
		t.setState(stateRolledBack)
		t.runHooks(hookAfterRollback, rollbackHooks)
		return fmt.Errorf("outbox: commit: %w", err)
	}
	t.setState(stateCommitted)
	t.runHooks(hookAfterCommit, commitHooks)
	return nil
}

func (t *Tx) rollback() error {
	_, rollbackHooks, ok := t.finish()
	if !ok {
		return ErrTxDone
	}
	err := t.tx.Rollback()
	t.setState(stateRolledBack)
	t.runHooks(hookAfterRollback, rollbackHooks)
	if err != nil {
		return fmt.Errorf("outbox: rollback: %w", err)
	}
	return nil
}

func (t *Tx) runHooks(kind string, hooks []func()) { t.runHooksFrom(kind, hooks, 0) }

// runHooksFrom runs hooks[from:]. A hook that calls runtime.Goexit ends
// the goroutine (the caller's), but the hooks after it still run while it
// unwinds: one of them may hand a committed event to the dispatcher.
func (t *Tx) runHooksFrom(kind string, hooks []func(), from int) {
	next := from
	defer func() {
		if next < len(hooks) { // hooks[next-1] called runtime.Goexit
			t.runHooksFrom(kind, hooks, next)
		}
	}()
	for next < len(hooks) {
		i := next
		next++
		t.runHook(kind, i, hooks[i])
	}
}

// runHook runs one hook and contains its panic: the remaining hooks must run
// and a hook must never crash the process. A hook that calls runtime.Goexit
// is logged as an ERROR too.
func (t *Tx) runHook(kind string, index int, fn func()) {
	goexit := true // until fn returned or panicked
	defer func() {
		p := recover()
		if p == nil {
			if goexit {
				t.logger.LogAttrs(context.Background(), slog.LevelError,
					"outbox: transaction hook called runtime.Goexit; the hooks after it still run, then the goroutine ends",
					slog.String("hook", kind), slog.Int("index", index), slog.String("stack", string(debug.Stack())))
			}
			return
		}
		attrs := []slog.Attr{
			slog.String("hook", kind),
			slog.Int("index", index),
			slog.String("panic_type", fmt.Sprintf("%T", p)),
		}
		// Only messages are logged, never arbitrary values that could
		// carry event payloads.
		switch v := p.(type) {
		case error:
			attrs = append(attrs, slog.String("panic", v.Error()))
		case string:
			attrs = append(attrs, slog.String("panic", v))
		}
		attrs = append(attrs, slog.String("stack", string(debug.Stack())))
		t.logger.LogAttrs(context.Background(), slog.LevelError, "outbox: transaction hook panicked", attrs...)
	}()
	fn()
	goexit = false
}

// From returns the [*Tx] carried by ctx, if any. It looks first at this
// package's own key, then at the transaction stored by [core.ContextWithTx].
// The returned Tx may already be finished; check [Tx.Active].
func From(ctx context.Context) (*Tx, bool) {
	if t, ok := ctx.Value(txKey{}).(*Tx); ok && t != nil {
		return t, true
	}
	if ct, ok := core.TxFromContext(ctx); ok {
		if t, ok := ct.(*Tx); ok && t != nil {
			return t, true
		}
	}
	return nil, false
}

// withTx stores t under this package's key and core's key.
func withTx(ctx context.Context, t *Tx) context.Context {
	return core.ContextWithTx(context.WithValue(ctx, txKey{}, t), t)
}

// Adopt wraps a transaction that the caller manages itself and returns a
// context carrying it (for [core.Client.Publish] and [From]). Hooks run
// when the caller commits or rolls back through the returned [*Tx]; ending
// tx directly (or letting its BeginTx context be cancelled) skips them.
// [Tx.Sqlx] returns nil. Only [WithLogger] applies.
//
// The database of tx is unknown, so [Manager.Do] called with the returned
// context reports [ErrForeignTx]; use [Manager.Adopt] to let Do join it.
func Adopt(ctx context.Context, tx *sql.Tx, opts ...Option) (context.Context, *Tx) {
	o := buildOptions(opts)
	t := newTx(tx, nil, nil, false, o.logger)
	return withTx(ctx, t), t
}

// AdoptX is [Adopt] for an *sqlx.Tx; [Tx.Sqlx] returns tx.
func AdoptX(ctx context.Context, tx *sqlx.Tx, opts ...Option) (context.Context, *Tx) {
	o := buildOptions(opts)
	t := newTx(sqlTxOf(tx), tx, nil, false, o.logger)
	return withTx(ctx, t), t
}

func sqlTxOf(tx *sqlx.Tx) *sql.Tx {
	if tx == nil {
		return nil
	}
	return tx.Tx
}
