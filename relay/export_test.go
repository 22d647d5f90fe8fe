package relay

import (
	"sync"
	"time"
)

// SweepArmed reports whether f's timer that forgets incidents is armed.
func SweepArmed(f *Full) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sweep != nil
}

// ManualSettle makes b's "recovered" timers manual: fire runs every timer
// armed so far, stopped ones included (as a timer firing while being
// stopped would), and returns how many it ran.
func ManualSettle(b *Breaker) (fire func() int) {
	var mu sync.Mutex
	var fns []func()
	b.mu.Lock()
	b.afterFunc = func(_ time.Duration, f func()) func() bool {
		mu.Lock()
		defer mu.Unlock()
		fns = append(fns, f)
		return func() bool { return false }
	}
	b.mu.Unlock()
	return func() int {
		mu.Lock()
		run := fns
		fns = nil
		mu.Unlock()
		for _, f := range run {
			f()
		}
		return len(run)
	}
}
