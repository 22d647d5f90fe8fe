package inflight_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/inflight"
	"github.com/outbox-go/outbox/internal/testsupport"
)

func TestInFlightAcquireReleaseContains(t *testing.T) {
	tr := inflight.New(0, nil)
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
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(0, clock.Now)
	tr.TryAcquire("a")
	clock.Advance(1000 * time.Hour)
	if !tr.Contains("a") || tr.TryAcquire("a") {
		t.Fatal("an entry expired without a TTL")
	}
}

func TestInFlightTTLExpiry(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(10*time.Second, clock.Now)
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
	tr := inflight.New(0, nil)
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

// A finished id is refused for a few seconds (a claim that raced with its
// DONE write must not deliver it again), then taken again (a replay).
func TestInFlightFinishRemembersBriefly(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(0, clock.Now)
	if !tr.TryAcquire("a") {
		t.Fatal("first acquire refused")
	}
	tr.Finish("a")
	if tr.Contains("a") {
		t.Fatal("finished id still in flight")
	}
	if tr.TryAcquire("a") {
		t.Fatal("finished id taken again at once")
	}
	clock.Advance(4 * time.Second)
	if tr.TryAcquire("a") {
		t.Fatal("finished id taken again within the window")
	}
	clock.Advance(2 * time.Second)
	if !tr.TryAcquire("a") {
		t.Fatal("finished id refused after the window")
	}
	// Release (a failed or fenced write) forgets at once.
	tr.Release("a")
	if !tr.TryAcquire("a") {
		t.Fatal("released id refused")
	}
}

// The memory is bounded: the oldest finished ids are forgotten first.
func TestInFlightFinishIsBounded(t *testing.T) {
	tr := inflight.New(0, nil)
	for i := range 9000 {
		id := fmt.Sprint(i)
		tr.TryAcquire(id)
		tr.Finish(id)
	}
	if !tr.TryAcquire("0") {
		t.Fatal("the oldest finished id is still remembered past the bound")
	}
	if tr.TryAcquire("8999") {
		t.Fatal("the newest finished id was forgotten")
	}
}

// A claim that read rows before an event was let go must not queue that
// stale copy: TryAcquireClaimed refuses an id released or finished after
// the claim's mark, and takes one let go before it.
func TestInFlightClaimAfterRelease(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(0, clock.Now)
	tr.TryAcquire("put-off")
	tr.TryAcquire("earlier")
	tr.Release("earlier")
	mark := tr.Mark() // the claim reads its rows now
	tr.Release("put-off")
	if tr.TryAcquireClaimed("put-off", mark) {
		t.Fatal("a claim from before the release took the event again")
	}
	if !tr.TryAcquireClaimed("earlier", mark) {
		t.Fatal("an event released before the claim began was refused")
	}
	if !tr.TryAcquireClaimed("put-off", tr.Mark()) {
		t.Fatal("a claim that began after the release was refused")
	}
	tr.Release("put-off")
	if !tr.TryAcquire("put-off") {
		t.Fatal("the hot path (no claim) was refused a released event")
	}
	// An id let go twice keeps its latest entry when the older one leaves
	// the ring.
	tr.TryAcquire("twice")
	tr.Finish("twice")
	clock.Advance(time.Minute)
	tr.TryAcquire("twice")
	tr.Release("twice")
	m := tr.Mark()
	for i := range 8192 - 1 {
		tr.TryAcquire(fmt.Sprint("filler", i))
		tr.Release(fmt.Sprint("filler", i))
	}
	if tr.TryAcquireClaimed("twice", m-1) {
		t.Fatal("the latest release of an id was forgotten with its older finish")
	}
}
