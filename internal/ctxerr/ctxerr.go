// Package ctxerr reports why a context ended as an error that both
// errors.Is(err, context.Canceled or context.DeadlineExceeded) and
// errors.Is(err, cause) match, for a context ended with a cause of its
// own (context.WithCancelCause, WithTimeoutCause, WithDeadlineCause).
package ctxerr

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Of returns ctx's error, wrapping its cause too when the cause differs:
// context.Cause alone loses ctx.Err() (a caller's
// errors.Is(err, context.DeadlineExceeded) fails), ctx.Err() alone the
// cause. Nil while ctx has not ended.
func Of(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// OfCommit returns the error err of the Commit of a transaction begun
// with ctx, told apart: once ctx ended, database/sql rolls the
// transaction back on its own, and a Commit that comes after that fails
// with sql.ErrTxDone ("transaction has already been committed or rolled
// back"), which names neither the rollback nor why; OfCommit returns
// ctx's error (Of) then, saying the transaction was rolled back. Any
// other err is returned as it is.
func OfCommit(ctx context.Context, err error) error {
	if errors.Is(err, sql.ErrTxDone) && ctx.Err() != nil {
		return fmt.Errorf("the transaction was rolled back: %w", Of(ctx))
	}
	return err
}
