package testsupport

import (
	"context"
	"database/sql"
	"sync"

	"github.com/outbox-go/outbox/core"
)

// Exec is one statement run on a [Tx].
type Exec struct {
	Query string
	Args  []any
}

// Tx is an in-memory core.Tx that records its statements. Commit runs the
// after-commit hooks, Rollback the after-rollback hooks; both deactivate
// it. Create it with NewTx (the zero value is an inactive transaction).
type Tx struct {
	mu            sync.Mutex
	active        bool
	execs         []Exec
	afterCommit   []func()
	afterRollback []func()
}

var _ core.Tx = (*Tx)(nil)

// NewTx returns an active transaction.
func NewTx() *Tx { return &Tx{active: true} }

// ExecContext records the statement and reports one row affected.
func (tx *Tx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.execs = append(tx.execs, Exec{Query: query, Args: args})
	return result{}, nil
}

// Active reports whether neither Commit nor Rollback ran.
func (tx *Tx) Active() bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.active
}

// AfterCommit registers fn to run on Commit.
func (tx *Tx) AfterCommit(fn func()) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.afterCommit = append(tx.afterCommit, fn)
}

// AfterRollback registers fn to run on Rollback.
func (tx *Tx) AfterRollback(fn func()) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.afterRollback = append(tx.afterRollback, fn)
}

// CommitHooks returns how many after-commit hooks are registered.
func (tx *Tx) CommitHooks() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return len(tx.afterCommit)
}

// Execs returns the statements run so far.
func (tx *Tx) Execs() []Exec {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return append([]Exec(nil), tx.execs...)
}

// Commit deactivates the transaction and runs its after-commit hooks.
func (tx *Tx) Commit() { tx.end(true) }

// Rollback deactivates the transaction and runs its after-rollback hooks.
func (tx *Tx) Rollback() { tx.end(false) }

func (tx *Tx) end(commit bool) {
	tx.mu.Lock()
	tx.active = false
	hooks := tx.afterRollback
	if commit {
		hooks = tx.afterCommit
	}
	tx.afterCommit, tx.afterRollback = nil, nil
	tx.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// result is the sql.Result of Tx.ExecContext.
type result struct{}

func (result) LastInsertId() (int64, error) { return 0, nil }
func (result) RowsAffected() (int64, error) { return 1, nil }
