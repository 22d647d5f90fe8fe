package deadline_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/deadline"
)

// Settle waits for a ctx whose deadline is within ahead, and returns at
// once for one without a deadline or with a deadline further away.
func TestSettle(t *testing.T) {
	near, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	deadline.Settle(near, 100*time.Millisecond)
	if near.Err() == nil {
		t.Error("Settle returned before a deadline within ahead ended ctx")
	}
	far, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	deadline.Settle(far, 100*time.Millisecond)
	if far.Err() != nil {
		t.Error("a deadline an hour away ended")
	}
	deadline.Settle(context.Background(), time.Hour) // no deadline: returns
}
