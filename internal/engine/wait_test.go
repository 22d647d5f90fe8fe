package engine

import (
	"context"
	"errors"
	"testing"
)

// A closed done wins over an ended ctx, every time; an open one gives
// ctx's error.
func TestWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	if err := Wait(ctx, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an open done = %v, want context.Canceled", err)
	}
	close(done)
	for range 100 {
		if err := Wait(ctx, done); err != nil {
			t.Fatalf("Wait on a closed done with an ended ctx = %v, want nil", err)
		}
	}
}
