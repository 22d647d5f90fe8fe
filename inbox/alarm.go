package inbox

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Bounds of an [alarm].
const (
	// maxAlarms is the most wake-up times an alarm keeps: the earliest
	// ones (a later one is left to a poll).
	maxAlarms = 1024
	// alarmSlack: a time at most this much before a kept one shares its
	// wake-up, so a burst of failures with one delay arms one timer.
	alarmSlack = 5 * time.Millisecond
	// alarmMargin is added to every time: a database may round a stored
	// time up to its precision (PostgreSQL rounds to the microsecond), and
	// a claim a hair too early would find the message not due yet.
	alarmMargin = time.Millisecond
)

// alarm wakes a dispatcher when a message it knows of becomes claimable:
// the next attempt of a message it abandoned, and the due time of a
// message enqueued through one of its inboxes (in this process). Without
// it such a message waited for the next poll, up to PollInterval after it
// was due. A message made claimable otherwise (by another process, or a
// time the alarm dropped) is still claimed at the first poll after it is
// due. The zero value is ready; it is safe for concurrent use.
type alarm struct {
	wake func() // the dispatcher's Wake; never blocks

	mu      sync.Mutex
	times   []time.Time // wall-clock times to wake at, sorted
	timer   *time.Timer // armed for times[0]
	stopped bool
}

// at asks for a wake-up at t (a wall-clock time with its monotonic
// reading, as time.Now().Add gives), or at once when t has passed.
func (a *alarm) at(t time.Time) {
	t = t.Add(alarmMargin)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	i := sort.Search(len(a.times), func(i int) bool { return !a.times[i].Before(t) })
	switch {
	case i < len(a.times) && a.times[i].Sub(t) <= alarmSlack:
		return // the wake-up at times[i] covers t
	case i == maxAlarms:
		return // later than every time kept, and no room: a poll finds it
	}
	a.times = slices.Insert(a.times, i, t)
	if len(a.times) > maxAlarms {
		a.times = a.times[:maxAlarms]
	}
	if i == 0 {
		a.arm()
	}
}

// arm sets the timer for times[0]. The caller holds mu.
func (a *alarm) arm() {
	d := time.Until(a.times[0])
	if a.timer == nil {
		a.timer = time.AfterFunc(d, a.ring)
		return
	}
	a.timer.Reset(d)
}

// ring drops the times that have come, arms the timer for the next one
// and wakes the dispatcher when any had come.
func (a *alarm) ring() {
	a.mu.Lock()
	now := time.Now()
	n := 0
	for n < len(a.times) && !a.times[n].After(now) {
		n++
	}
	a.times = slices.Delete(a.times, 0, n)
	if len(a.times) > 0 && !a.stopped {
		a.arm()
	}
	a.mu.Unlock()
	if n > 0 {
		a.wake()
	}
}

// stop drops every time and disarms the timer for good: the dispatcher
// is closing.
func (a *alarm) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	a.times = nil
	if a.timer != nil {
		a.timer.Stop()
	}
}
