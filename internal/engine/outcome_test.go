package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/retry"
)

// A retry policy that panics gets the default policy's delay: the panic
// ran in a worker goroutine, where nothing recovered it, and killed the
// process.
func TestDecideWithAPanickingPolicy(t *testing.T) {
	bug := retry.PolicyFunc(func(int) time.Duration { panic("a bug in the policy") })
	outcome, delay := engine.Decide(errors.New("failed"), 1, 3, bug)
	if outcome != engine.Retry {
		t.Fatalf("outcome = %v, want Retry", outcome)
	}
	// The default's first delay: 200 ms with a jitter of 0.5–1.5.
	if delay < 100*time.Millisecond || delay > 300*time.Millisecond {
		t.Errorf("delay = %v, want the default policy's first delay (100–300 ms)", delay)
	}
	if d := engine.Delay(retry.PolicyFunc(func(int) time.Duration { return -time.Second }), 1); d != 0 {
		t.Errorf("a negative delay = %v, want 0", d)
	}
}
