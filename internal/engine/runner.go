package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/outbox-go/outbox/core"
)

// Runner is the life cycle of one background loop. Every runnable part of
// the library (the poller, the inbox dispatcher, the cleaner, a tenant
// set's refresh) has the same two calls on top of it:
//
//   - Start runs the loop in a goroutine and returns at once. Starting a
//     running loop is a *core.ConfigError; starting a closed one is
//     core.ErrClosed.
//   - Close stops the loop: no new cycle begins, the cycle in progress
//     finishes, and Close returns once the loop has exited. If ctx ends
//     first, the loop's context is cancelled (interrupting the cycle in
//     progress) and ctx's error is returned; calling Close again waits
//     again. Close is final, and a no-op on a loop that never started.
//
// The zero value is not usable: create one with [NewRunner]. It is safe for
// concurrent use.
type Runner struct {
	what string // the part, for the "already started" error
	wake chan struct{}

	mu     sync.Mutex
	state  runState
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the loop exited
	cancel context.CancelFunc
}

type runState uint8

const (
	idle runState = iota
	running
	closed
)

// NewRunner returns an idle runner; what names the part in errors
// ("poller", "inbox dispatcher").
func NewRunner(what string) *Runner {
	return &Runner{what: what, wake: make(chan struct{}, 1)}
}

// Start runs loop in a new goroutine. Its ctx keeps the values of Start's
// ctx but not its cancellation: it ends when a Close gives up waiting.
// stop is closed when Close is called; loop must return soon after. A nil
// ctx returns core.ErrNilContext and starts nothing.
func (r *Runner) Start(ctx context.Context, loop func(ctx context.Context, stop <-chan struct{})) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state {
	case running:
		return &core.ConfigError{Field: r.what, Msg: "already started"}
	case closed:
		return core.ErrClosed
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.state, r.cancel = running, cancel
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go func(stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		loop(runCtx, stop)
	}(r.stop, r.done)
	return nil
}

// Close stops the loop and waits for it (see [Runner]). A nil ctx returns
// core.ErrNilContext and stops nothing.
func (r *Runner) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	r.mu.Lock()
	was := r.state
	r.state = closed
	if was == running {
		close(r.stop)
	}
	done, cancel := r.done, r.cancel
	r.mu.Unlock()
	if done == nil { // never started
		return nil
	}
	err := Wait(ctx, done) // finished already: nil, whatever ctx
	cancel()
	return err
}

// Running reports whether the loop was started and not closed.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == running
}

// Closed reports whether Close was called.
func (r *Runner) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == closed
}

// Wake cuts the current wait of [Runner.Pace] short, so the next cycle
// starts at once. It never blocks; wakes before the next wait coalesce.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Pace runs cycle until stop is closed: first after the wait first, then
// each time after the wait the previous cycle returned (0: at once). Wake
// ends a wait early; woken tells the cycle it was started that way. Wakes
// made before a cycle starts are served by that cycle (one more cycle
// runs for a Wake made while a cycle runs). Call it from the loop given
// to Start.
func (r *Runner) Pace(ctx context.Context, stop <-chan struct{}, first time.Duration, cycle func(ctx context.Context, woken bool) (next time.Duration)) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		woken := false
		select {
		case <-stop:
			return
		case <-t.C:
		case <-r.wake: // (timers of go 1.23+ need no draining before Reset)
			woken = true
		}
		select { // a Close during the wait wins over a due timer
		case <-stop:
			return
		default:
		}
		select { // a Wake made before this cycle starts is served by it
		case <-r.wake:
			woken = true
		default:
		}
		t.Reset(cycle(ctx, woken))
	}
}

// CloseErr is the error of a Close made of several parts' Closes, each
// given ctx: errs joined, without the nils, where ctx's error, which
// several parts return when ctx ends first, counts once. When it is the
// only error it is returned as is, as the Close contract says ("return
// ctx's error"), so that err == context.DeadlineExceeded holds, not only
// errors.Is.
func CloseErr(ctx context.Context, errs ...error) error {
	ctxErr := ctx.Err()
	var kept []error
	seen := false
	for _, err := range errs {
		switch {
		case err == nil:
		case ctxErr != nil && err == ctxErr:
			if !seen {
				seen = true
				kept = append(kept, err)
			}
		default:
			kept = append(kept, err)
		}
	}
	if len(kept) == 1 {
		return kept[0]
	}
	return errors.Join(kept...)
}

// UntilStop returns a child of ctx that is also cancelled once stop is
// closed: for a loop whose cycle may be interrupted at any point without
// loss (a purge, a refresh), so that Close does not wait for it.
func UntilStop(ctx context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
