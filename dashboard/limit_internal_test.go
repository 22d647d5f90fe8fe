package dashboard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// A driver's timeout that comes a moment before the query timeout ends
// ctx (a dial given ctx's deadline) is the query timeout all the same:
// the page answers 504 saying so, not 500. It was 500 about half the
// time for a database whose connect hangs.
func TestTimedOutWaitsForTheDeadlineJustAhead(t *testing.T) {
	ctx, cancel := withQueryTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	dial := fmt.Errorf("list dead summaries: dial tcp 127.0.0.1:3306: %w", os.ErrDeadlineExceeded)
	if err := timedOut(ctx, 30*time.Millisecond, dial); !errors.As(err, new(*timeoutError)) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("timedOut = %v, want a timeoutError wrapping the dial's error", err)
	}

	// Any other error, or one far from the deadline, is as it was.
	ctx2, cancel2 := withQueryTimeout(context.Background(), time.Hour)
	defer cancel2()
	if err := timedOut(ctx2, time.Hour, dial); errors.As(err, new(*timeoutError)) {
		t.Fatalf("timedOut an hour ahead of the deadline = %v, want the error as it is", err)
	}
	ctx3, cancel3 := withQueryTimeout(context.Background(), 30*time.Millisecond)
	defer cancel3()
	other := errors.New("syntax error")
	if err := timedOut(ctx3, 30*time.Millisecond, other); err != other {
		t.Fatalf("timedOut(other) = %v", err)
	}
}
