package inbox_test

import (
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/retry"
)

// The default backoff is min(2^attempt s, 60 s).
func TestBackoff(t *testing.T) {
	var p retry.Policy = inbox.Backoff{}
	for attempt, want := range map[int]time.Duration{
		-1: time.Second, 0: time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 5: 32 * time.Second,
		6: time.Minute, 7: time.Minute, 63: time.Minute, 1 << 30: time.Minute,
	} {
		if got := p.Delay(attempt); got != want {
			t.Errorf("Delay(%d) = %v, want %v", attempt, got, want)
		}
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[inbox.Status]string{
		inbox.StatusSeen: "Seen", inbox.StatusProcessing: "Processing", inbox.StatusDone: "Done", inbox.StatusDead: "Dead", 9: "Status(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", s, got, want)
		}
	}
}
