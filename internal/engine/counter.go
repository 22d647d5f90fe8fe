package engine

import (
	"context"
	"sync/atomic"
)

// Counter counts work in progress. The zero value is not usable: create
// one with [NewCounter]. It is safe for concurrent use.
type Counter struct {
	closed atomic.Bool
	held   atomic.Int64
	zero   chan struct{} // signalled when held drops to zero
	ctx    context.Context
	cancel context.CancelFunc
}

// NewCounter returns an open counter with nothing held, whose Context is a child
// of parent.
func NewCounter(parent context.Context) *Counter {
	c := &Counter{zero: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(parent)
	return c
}

// Context is the context the counted work runs under: cancelled when its
// parent is, and when Drain ends (at once when Drain gives up).
func (c *Counter) Context() context.Context { return c.ctx }

// Hold counts one more unit of work, unless the counter is closed: then
// it counts nothing and reports false. A Hold that succeeds is matched by
// one Release.
func (c *Counter) Hold() bool {
	c.held.Add(1)
	if c.closed.Load() { // checked after counting: Wait cannot miss us
		c.Release()
		return false
	}
	return true
}

// Add counts n more units of work whatever the state (for work taken
// before Close that is split up later); each is matched by one Release.
func (c *Counter) Add(n int) { c.held.Add(int64(n)) }

// Release counts one unit of work less.
func (c *Counter) Release() {
	if c.held.Add(-1) == 0 {
		select {
		case c.zero <- struct{}{}:
		default:
		}
	}
}

// Close refuses further Holds. It may be called more than once.
func (c *Counter) Close() { c.closed.Store(true) }

// Closed reports whether Close was called.
func (c *Counter) Closed() bool { return c.closed.Load() }

// Held returns the units of work in progress.
func (c *Counter) Held() int64 { return c.held.Load() }

// Drain closes the counter and waits until nothing is held. When ctx ends
// first it cancels Context, interrupting the work still running, and
// returns ctx's error with how many units were still held; calling Drain
// again waits again.
func (c *Counter) Drain(ctx context.Context) (held int64, err error) {
	c.Close()
	for c.held.Load() > 0 {
		select {
		case <-c.zero:
		case <-ctx.Done():
			c.cancel()
			return c.held.Load(), ctx.Err()
		}
	}
	c.cancel()
	return 0, nil
}
