package writegate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/writegate"
)

func TestWriteGate(t *testing.T) {
	g := writegate.New()
	ctx := context.Background()
	if err := g.Yield(ctx); err != nil {
		t.Fatalf("Yield on an idle gate: %v", err)
	}
	held, release, err := g.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Re-entrant through the returned context.
	_, inner, err := g.Acquire(held)
	if err != nil {
		t.Fatal(err)
	}
	inner()
	if err := g.Yield(held); err != nil {
		t.Fatalf("Yield by the holder: %v", err)
	}
	// A business transaction waits while a store write holds the gate.
	yielded := make(chan error, 1)
	go func() { yielded <- g.Yield(ctx) }()
	select {
	case <-yielded:
		t.Fatal("Yield returned while a store write held the gate")
	default:
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, err := g.Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Acquire: %v, want DeadlineExceeded", err)
	}
	release()
	select {
	case err := <-yielded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Yield did not return after release")
	}
	var nilGate *writegate.Gate
	if _, rel, err := nilGate.Acquire(ctx); err != nil {
		t.Fatal(err)
	} else {
		rel()
	}
	if err := nilGate.Yield(ctx); err != nil {
		t.Fatal(err)
	}
}

// Yield waits at most MaxYield for the store writes: one that takes longer
// waits for another process's lock in SQLite's busy handler, and waiting
// behind it (and behind every store write queued after it) added several
// busy timeouts to a business transaction's BEGIN (30 s with a 10 s busy
// timeout), which the README bounds by one busy timeout.
func TestYieldGivesUpAfterMaxYield(t *testing.T) {
	g := writegate.New()
	_, release, err := g.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	yielded := make(chan error, 1)
	go func() { yielded <- g.Yield(context.Background()) }()
	select {
	case err := <-yielded:
		if err != nil {
			t.Fatalf("Yield behind a store write that does not end = %v, want nil (go ahead)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Yield still waits behind a store write that does not end")
	}
}
