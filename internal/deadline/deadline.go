// Package deadline settles a context whose deadline a socket or driver
// met first.
package deadline

import (
	"context"
	"time"
)

// Settle waits for ctx to end when its deadline is past or at most ahead
// away: a socket or a driver given ctx's deadline may time out a moment
// before ctx's own timer ends ctx, and until it does, ctx.Err() and
// context.Cause do not tell that it was ctx's deadline. The wait is bounded
// by the deadline plus a second, for a ctx that would not end. Without a
// deadline, or one further away, it returns at once.
func Settle(ctx context.Context, ahead time.Duration) {
	dl, ok := ctx.Deadline()
	if !ok || ctx.Err() != nil || time.Until(dl) > ahead {
		return
	}
	t := time.NewTimer(time.Until(dl) + time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
