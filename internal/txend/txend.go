// Package txend reports a statement that found its caller's transaction
// ended (sql.ErrTxDone) as core.ErrNoTransaction, saying it once.
package txend

import (
	"database/sql"
	"errors"

	"github.com/outbox-go/outbox/core"
)

// Error is a store's error for a statement on a transaction already
// committed or rolled back. Its text says so once ("outbox: no active
// transaction: sql: transaction has already been committed or rolled
// back"; the store's own text around sql.ErrTxDone said it again); it
// matches core.ErrNoTransaction and keeps the store's error in its chain
// (errors.As finds a *core.BatchError, a driver's error).
type Error struct{ Err error }

func (e *Error) Error() string { return core.ErrNoTransaction.Error() + ": " + sql.ErrTxDone.Error() }

// Unwrap returns core.ErrNoTransaction and the store's error.
func (e *Error) Unwrap() []error { return []error{core.ErrNoTransaction, e.Err} }

// Mark returns err as an *Error when it says the transaction had ended
// (sql.ErrTxDone) and does not match core.ErrNoTransaction yet; err
// otherwise.
func Mark(err error) error {
	if errors.Is(err, sql.ErrTxDone) && !errors.Is(err, core.ErrNoTransaction) {
		return &Error{Err: err}
	}
	return err
}
