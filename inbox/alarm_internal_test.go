package inbox

import (
	"slices"
	"testing"
	"time"
)

// The alarm wakes at once for a time that has passed, keeps its times
// sorted and bounded (the earliest ones), lets a time just before a kept
// one share its wake-up, and does nothing once stopped.
func TestAlarm(t *testing.T) {
	woke := make(chan struct{}, 1)
	a := &alarm{wake: func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	}}
	a.at(time.Now().Add(-time.Second))
	select {
	case <-woke:
	case <-time.After(20 * time.Second):
		t.Fatal("no wake-up for a time that has passed")
	}

	far := time.Now().Add(time.Hour)
	for i := range maxAlarms + 10 {
		a.at(far.Add(time.Duration(maxAlarms+10-i) * time.Second)) // latest first
	}
	a.at(far.Add(-time.Millisecond))              // earlier than all: kept, the latest dropped
	a.at(far.Add(time.Second - time.Millisecond)) // 1 ms before far+1 s: shares its wake-up
	a.mu.Lock()
	n, sorted, first := len(a.times), slices.IsSortedFunc(a.times, func(x, y time.Time) int { return x.Compare(y) }), a.times[0]
	a.mu.Unlock()
	if n != maxAlarms || !sorted {
		t.Fatalf("%d times kept (sorted: %v), want %d sorted", n, sorted, maxAlarms)
	}
	if want := far.Add(-time.Millisecond + alarmMargin); !first.Equal(want) {
		t.Errorf("first time %v, want the earliest given %v", first, want)
	}
	a.mu.Lock()
	second := a.times[1]
	a.mu.Unlock()
	if want := far.Add(time.Second + alarmMargin); !second.Equal(want) {
		t.Errorf("second time %v, want %v (a time 1 ms before it shares its wake-up)", second, want)
	}

	a.stop()
	a.at(time.Now().Add(-time.Second))
	a.mu.Lock()
	n = len(a.times)
	a.mu.Unlock()
	if n != 0 {
		t.Errorf("%d times kept after stop", n)
	}
	select {
	case <-woke:
		t.Error("woken after stop")
	default:
	}
}
