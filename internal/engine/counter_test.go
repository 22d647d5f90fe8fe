package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/internal/engine"
)

func TestCounter(t *testing.T) {
	if _, err := engine.NewCounter(context.Background()).Drain(context.Background()); err != nil {
		t.Fatalf("Drain with nothing held = %v", err)
	}
	c := engine.NewCounter(context.Background())
	if first, second := c.Hold(), c.Hold(); !first || !second || c.Held() != 2 {
		t.Fatalf("Hold on an open counter: held %d", c.Held())
	}
	c.Close()
	if c.Hold() || c.Held() != 2 || !c.Closed() {
		t.Fatalf("Hold after Close must be refused; held %d", c.Held())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if held, err := c.Drain(ctx); !errors.Is(err, context.Canceled) || held != 2 {
		t.Fatalf("Drain with a cancelled ctx = %d, %v; want 2, Canceled", held, err)
	}
	if c.Context().Err() == nil {
		t.Fatal("a Drain that gave up must cancel the work's Context")
	}
	done := make(chan error, 1)
	go func() { _, err := c.Drain(context.Background()); done <- err }()
	c.Release()
	c.Add(1) // taken before Close, split later
	c.Release()
	c.Release()
	if err := <-done; err != nil || c.Held() != 0 {
		t.Fatalf("Drain = %v, held %d", err, c.Held())
	}
}

func TestCounterConcurrentHoldAndClose(t *testing.T) {
	for range 200 {
		c := engine.NewCounter(context.Background())
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if c.Hold() {
					c.Release()
				}
			})
		}
		if _, err := c.Drain(context.Background()); err != nil || c.Context().Err() == nil {
			t.Fatalf("Drain = %v; its Context must end with it", err)
		}
		wg.Wait()
		if c.Held() != 0 {
			t.Fatalf("held %d after everything returned", c.Held())
		}
	}
}
