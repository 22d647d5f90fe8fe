package drain_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/internal/drain"
)

func TestCounter(t *testing.T) {
	c := drain.New()
	if err := c.Wait(context.Background()); err != nil {
		t.Fatalf("Wait with nothing held = %v", err)
	}
	if !c.Hold() || !c.Hold() || c.Held() != 2 {
		t.Fatalf("Hold on an open counter: held %d", c.Held())
	}
	c.Close()
	if c.Hold() || c.Held() != 2 || !c.Closed() {
		t.Fatalf("Hold after Close must be refused; held %d", c.Held())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled ctx = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait(context.Background()) }()
	c.Release()
	c.Add(1) // taken before Close, split later
	c.Release()
	c.Release()
	if err := <-done; err != nil || c.Held() != 0 {
		t.Fatalf("Wait = %v, held %d", err, c.Held())
	}
}

func TestCounterConcurrentHoldAndClose(t *testing.T) {
	for range 200 {
		c := drain.New()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if c.Hold() {
					c.Release()
				}
			})
		}
		c.Close()
		if err := c.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if c.Held() != 0 {
			t.Fatalf("held %d after everything returned", c.Held())
		}
	}
}
