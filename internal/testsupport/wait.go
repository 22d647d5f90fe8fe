package testsupport

import (
	"reflect"
	"testing"
	"time"
)

// tick is how often WaitFor re-checks its condition when no wake channel
// signals.
const tick = 2 * time.Millisecond

// WaitFor returns once cond holds and fails t when timeout passes first.
// It re-checks cond on every signal of any of the wake channels (nil
// channels are ignored) and on a short ticker, so a condition that changes
// without a signal is still seen. what names the awaited condition in the
// failure message.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool, wake ...<-chan struct{}) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ticker.C)},
	}
	for _, w := range wake {
		if w != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
		}
	}
	for {
		chosen, _, _ := reflect.Select(cases)
		if cond() {
			return
		}
		if chosen == 0 {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// Recv returns the next value of ch and fails t when timeout passes first.
func Recv[T any](t testing.TB, timeout time.Duration, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	panic("unreachable")
}
