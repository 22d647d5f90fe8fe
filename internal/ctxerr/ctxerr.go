// Package ctxerr reports why a context ended as an error that both
// errors.Is(err, context.Canceled or context.DeadlineExceeded) and
// errors.Is(err, cause) match, for a context ended with a cause of its
// own (context.WithCancelCause, WithTimeoutCause, WithDeadlineCause).
package ctxerr

import (
	"context"
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
