package engine

import "context"

// Wait waits until done is closed or ctx ends. It returns nil when done is
// closed, also when ctx has ended too (a select of both would pick at
// random), and ctx's error otherwise.
func Wait(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
