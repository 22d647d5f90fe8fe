package dispatcher_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/dispatcher"
)

func TestInFlightAcquireReleaseContains(t *testing.T) {
	tr := dispatcher.NewInFlight(0, nil)
	if tr.Contains("a") || tr.Len() != 0 {
		t.Fatal("new tracker is not empty")
	}
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire(a) on an empty tracker = false")
	}
	if tr.TryAcquire("a") {
		t.Fatal("second TryAcquire(a) = true, want false")
	}
	if !tr.TryAcquire("b") {
		t.Fatal("TryAcquire(b) = false: ids must be independent")
	}
	if !tr.Contains("a") || !tr.Contains("b") || tr.Contains("c") || tr.Len() != 2 {
		t.Fatalf("Contains a=%v b=%v c=%v Len=%d; want true true false 2", tr.Contains("a"), tr.Contains("b"), tr.Contains("c"), tr.Len())
	}
	tr.Release("a")
	tr.Release("never-held") // no-op
	if tr.Contains("a") || tr.Len() != 1 {
		t.Fatalf("after Release(a): Contains(a)=%v Len=%d", tr.Contains("a"), tr.Len())
	}
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire after Release = false")
	}
}

func TestInFlightWithoutTTLNeverExpires(t *testing.T) {
	clock := newFakeClock()
	tr := dispatcher.NewInFlight(0, clock.Now)
	tr.TryAcquire("a")
	clock.Advance(1000 * time.Hour)
	if !tr.Contains("a") || tr.TryAcquire("a") {
		t.Fatal("an entry expired without a TTL")
	}
}

func TestInFlightTTLExpiry(t *testing.T) {
	clock := newFakeClock()
	tr := dispatcher.NewInFlight(10*time.Second, clock.Now)
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire(a) = false")
	}
	clock.Advance(9*time.Second + 999*time.Millisecond)
	if !tr.Contains("a") || tr.TryAcquire("a") {
		t.Fatal("entry expired before its TTL")
	}
	clock.Advance(time.Millisecond) // exactly the TTL
	if tr.Contains("a") {
		t.Fatal("Contains(a) = true at the TTL, want false (expired)")
	}
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire of an expired entry = false")
	}
	// Re-acquired: a fresh TTL from now.
	clock.Advance(9 * time.Second)
	if !tr.Contains("a") || tr.TryAcquire("a") {
		t.Fatal("re-acquired entry did not get a fresh TTL")
	}
	tr.Release("a")
	if tr.Contains("a") {
		t.Fatal("Release did not drop the entry")
	}
}

func TestInFlightConcurrentAcquireHasOneWinner(t *testing.T) {
	tr := dispatcher.NewInFlight(0, nil)
	for round := range 50 {
		id := string(rune('a' + round%26))
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if tr.TryAcquire(id) {
					wins.Add(1)
				}
				_ = tr.Contains(id)
			}()
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d goroutines acquired %q, want 1", round, n, id)
		}
		tr.Release(id)
	}
	if tr.Len() != 0 {
		t.Fatalf("Len = %d after releasing everything", tr.Len())
	}
}
