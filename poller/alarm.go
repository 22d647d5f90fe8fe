package poller

import (
	"slices"
	"sync"
	"time"

	"github.com/outbox-go/outbox/internal/handoff"
)

// The alarms of events put off (core.Unavailable, types without a
// listener left for later): their rows come due at a time the poller
// would otherwise only reach at its next Interval.
const (
	// alarmStep: due times are rounded up to it, so that a burst of
	// events put off together costs one wake-up.
	alarmStep = 20 * time.Millisecond
	// maxAlarms bounds the due times remembered per store; later ones
	// wait for the regular polls.
	maxAlarms = 256
)

func init() {
	handoff.WakeAt = func(p any, id string) func(time.Time) {
		pp := p.(*Poller)
		return func(at time.Time) { pp.wakeAt(id, at) }
	}
}

// alarms are the due times remembered per store and the timer of the
// earliest.
type alarms struct {
	mu     sync.Mutex
	stores map[string]*storeAlarms
	closed bool
	// calls are the timers of afterFunc not fired yet.
	calls map[*time.Timer]struct{}
}

// afterFunc calls fn after d, as time.AfterFunc, unless the poller closed
// meanwhile: Close stops the timer. Left running, a timer kept the closed
// poller (its dispatcher, listeners and store) reachable until it fired,
// hours later for a delayed event.
func (p *Poller) afterFunc(d time.Duration, fn func()) {
	a := &p.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if a.calls == nil {
		a.calls = map[*time.Timer]struct{}{}
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		a.mu.Lock()
		_, live := a.calls[t]
		delete(a.calls, t)
		a.mu.Unlock()
		if live {
			fn()
		}
	})
	a.calls[t] = struct{}{}
}

type storeAlarms struct {
	at    []time.Time // sorted, distinct
	timer *time.Timer // fires at at[0]
}

// wakeAt makes the poller poll store id (as a wake-up: without
// SkipRecent) once at has come.
func (p *Poller) wakeAt(id string, at time.Time) {
	at = at.Truncate(alarmStep).Add(alarmStep)
	a := &p.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if a.stores == nil {
		a.stores = map[string]*storeAlarms{}
	}
	s := a.stores[id]
	if s == nil {
		s = &storeAlarms{}
		a.stores[id] = s
	}
	i, found := slices.BinarySearchFunc(s.at, at, time.Time.Compare)
	if found || i >= maxAlarms {
		return
	}
	s.at = slices.Insert(s.at, i, at)
	if len(s.at) > maxAlarms {
		s.at = s.at[:maxAlarms]
	}
	if i == 0 {
		p.armAlarm(id, s)
	}
}

// armAlarm sets s's timer to its earliest due time. alarms.mu is held.
func (p *Poller) armAlarm(id string, s *storeAlarms) {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(time.Until(s.at[0]), func() { p.ringAlarm(id, s) })
}

// ringAlarm wakes the poll of store id for the due times that came, and
// arms the timer for the next.
func (p *Poller) ringAlarm(id string, s *storeAlarms) {
	a := &p.alarms
	a.mu.Lock()
	if a.closed || a.stores[id] != s {
		a.mu.Unlock()
		return
	}
	now := time.Now()
	n := 0
	for n < len(s.at) && !s.at[n].After(now) {
		n++
	}
	s.at = s.at[n:]
	if len(s.at) > 0 {
		p.armAlarm(id, s)
	} else {
		delete(a.stores, id)
	}
	a.mu.Unlock()
	if n > 0 {
		p.wakeStore(id)
	}
}

// stopAlarms stops every alarm: the poller closes.
func (p *Poller) stopAlarms() {
	a := &p.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for id := range a.stores {
		a.drop(id)
	}
	for t := range a.calls {
		t.Stop()
	}
	a.calls = nil
}

// forgetAlarms stops the alarms of store id: it is no longer polled.
func (p *Poller) forgetAlarms(id string) {
	a := &p.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drop(id)
}

// drop stops and forgets the alarms of store id. a.mu is held.
func (a *alarms) drop(id string) {
	if s := a.stores[id]; s != nil && s.timer != nil {
		s.timer.Stop()
	}
	delete(a.stores, id)
}
