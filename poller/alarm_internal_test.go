package poller

import (
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"
)

// Due times round up to alarmStep and are remembered once each, sorted,
// at most maxAlarms; the timer rings for the earliest, wakes the store's
// poll, and arms itself for the next; a forgotten store rings no more.
func TestAlarms(t *testing.T) {
	p, err := NewMulti(Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p.wakeAt("s", now.Add(time.Hour))
	p.wakeAt("s", now.Add(time.Hour)) // the same bucket: once
	p.wakeAt("s", now.Add(-time.Second))
	for i := range maxAlarms + 5 {
		p.wakeAt("t", now.Add(time.Hour+time.Duration(i)*alarmStep))
	}
	p.alarms.mu.Lock()
	if n := len(p.alarms.stores["t"].at); n != maxAlarms {
		t.Errorf("%d due times remembered for t, want %d", n, maxAlarms)
	}
	p.alarms.mu.Unlock()
	testsupport.WaitFor(t, 5*time.Second, "the past due time to wake store s", p.wakePending, nil)
	p.wakeMu.Lock()
	woken := append([]string(nil), p.wokenStores...)
	p.wakeMu.Unlock()
	if len(woken) != 1 || woken[0] != "s" {
		t.Fatalf("woken %v, want store s woken by its past due time", woken)
	}
	p.alarms.mu.Lock()
	at := p.alarms.stores["s"].at
	p.alarms.mu.Unlock()
	if len(at) != 1 || at[0].Before(now.Add(time.Hour)) {
		t.Errorf("due times left for s: %v, want the one an hour away", at)
	}
	p.forgetAlarms("s")
	p.stopAlarms()
	p.wakeAt("s", now)
	if len(p.alarms.stores) != 0 {
		t.Errorf("alarms armed after stopAlarms: %v", p.alarms.stores)
	}
}

// The timers of claims asked for later (a delayed successor's due time,
// locked successors) run their call once due, and Close stops the others:
// left running, they kept the closed poller reachable until they fired.
func TestAfterFuncStopsAtClose(t *testing.T) {
	p, err := NewMulti(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	p.afterFunc(time.Millisecond, func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a due call did not run")
	}
	p.afterFunc(time.Hour, func() {})
	p.alarms.mu.Lock()
	pending := len(p.alarms.calls)
	p.alarms.mu.Unlock()
	if pending != 1 {
		t.Fatalf("%d calls pending, want the one an hour away (the fired one forgotten)", pending)
	}
	p.stopAlarms()                           // stops it: no timer left to keep the poller reachable
	p.afterFunc(time.Millisecond, func() {}) // closed: never armed
	if len(p.alarms.calls) != 0 {
		t.Errorf("%d calls pending after stopAlarms, want none", len(p.alarms.calls))
	}
}
