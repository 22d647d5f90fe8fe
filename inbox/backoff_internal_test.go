package inbox

import (
	"testing"
	"time"
)

// An inbox whose claims fail in a row is skipped for 1 s, 2 s, 4 s, ...,
// 30 s at most; a claim that succeeds ends that (so does an enqueue:
// notify).
func TestClaimBackOff(t *testing.T) {
	m := &member{d: &Dispatcher{}}
	skip := func() time.Duration { return time.Until(time.Unix(0, m.skipUntil.Load())) }
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		m.backOff(true, 0)
		if got := skip(); got > want || got < want-time.Second {
			t.Errorf("after %d failures: skipped for %v, want %v", i+1, got, want)
		}
	}
	m.backOff(false, 0)
	if m.skipUntil.Load() != 0 || m.failures != 0 {
		t.Errorf("after a success: skipUntil %d, failures %d; want 0, 0", m.skipUntil.Load(), m.failures)
	}
	// A claim that failed slowly (a database that does not answer, its
	// StatusTimeout) is skipped four times as long: the other inboxes
	// get most of the loop's time.
	m.backOff(true, 5*time.Second)
	if got := skip(); got > 20*time.Second || got < 19*time.Second {
		t.Errorf("after a failure that took 5s: skipped for %v, want 20s", got)
	}
	m.backOff(true, time.Hour)
	if got := skip(); got > 5*time.Minute || got < 5*time.Minute-time.Second {
		t.Errorf("after a failure that took an hour: skipped for %v, want 5m", got)
	}
}
