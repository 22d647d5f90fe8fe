package rabbitmq

import (
	"testing"
	"time"
)

// The wait between two dials never passes ReconnectMaxDelay, jitter
// included (it reached 1.5 times it), and stays within half to one and a
// half times the delay below it.
func TestReconnectWaitCapped(t *testing.T) {
	for range 10_000 {
		if w := reconnectWait(time.Second, time.Second); w < 500*time.Millisecond || w > time.Second {
			t.Fatalf("wait %v for a delay of 1s capped at 1s, want 0.5s..1s", w)
		}
		if w := reconnectWait(100*time.Millisecond, 5*time.Second); w < 50*time.Millisecond || w > 150*time.Millisecond {
			t.Fatalf("wait %v for a delay of 100ms, want 50ms..150ms", w)
		}
	}
}
