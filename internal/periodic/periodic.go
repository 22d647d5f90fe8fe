// Package periodic runs a function at a fixed interval in the background
// until it is stopped: the loop of the retention purge and of the database
// discovery refresh.
package periodic

import (
	"context"
	"sync"
	"time"
)

// Job is a background loop. The zero value is ready to Start. Its methods
// are safe for concurrent use.
type Job struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start calls fn every interval (first after one interval) until Stop,
// with a context carrying parent's values, cancelled by Stop. It returns
// false, changing nothing, when the job is running already.
func (j *Job) Start(parent context.Context, interval time.Duration, fn func(ctx context.Context)) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancel != nil {
		return false
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	done := make(chan struct{})
	j.cancel, j.done = cancel, done
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			fn(ctx)
		}
	}()
	return true
}

// Stop cancels the loop (and a call of fn in progress) and waits for it to
// return, or for ctx: then it returns ctx's error and a later Stop waits
// again. Stopping a job that is not running returns nil; a stopped job may
// be started again.
func (j *Job) Stop(ctx context.Context) error {
	j.mu.Lock()
	cancel, done := j.cancel, j.done
	j.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		j.mu.Lock()
		if j.done == done {
			j.cancel, j.done = nil, nil
		}
		j.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
