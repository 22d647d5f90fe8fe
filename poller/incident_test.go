package poller_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/poller"
)

// A cycle skipped because the cold queue is full never reaches the
// database, so it proves nothing about it: it must not end an incident.
// Otherwise a hung database (workers stuck on status writes, the cold
// queue full) logs "poller recovered" and a new ERROR every time the queue
// fills and empties, instead of one ERROR per incident.
func TestSkippedFullCycleDoesNotEndAnIncident(t *testing.T) {
	e := newPollEnv(10)
	var failing atomic.Bool
	var failed atomic.Int32
	e.st.Fail = func(op, _ string) error {
		if op == "claim" && failing.Load() {
			failed.Add(1)
			return errors.New("connection refused")
		}
		return nil
	}
	failing.Store(true)
	p := e.poller(t, poller.Config{Interval: 5 * time.Millisecond})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	errorLines := func() int { return len(e.logs.Lines("level=ERROR", "poll cycle failed")) }
	recovered := func() int { return len(e.logs.Lines("poller recovered")) }

	for round := 1; round <= 3; round++ {
		from := failed.Load()
		waitFor(t, "three failing cycles", func() bool { return failed.Load() >= from+3 }, nil)
		// The queue fills up (workers stuck): cycles are skipped.
		e.q.setRoom(0)
		cycles := e.metrics.DepthCalls.Load()
		waitFor(t, "three skipped cycles", func() bool { return e.metrics.DepthCalls.Load() >= cycles+3 }, nil)
		e.q.setRoom(10)
	}
	from := failed.Load()
	waitFor(t, "more failing cycles", func() bool { return failed.Load() >= from+3 }, nil)
	if n := errorLines(); n != 1 {
		t.Errorf("%d ERROR lines for one ongoing incident, want 1", n)
	}
	if n := recovered(); n != 0 {
		t.Errorf("%d \"poller recovered\" lines while every claim still fails, want 0", n)
	}

	failing.Store(false)
	waitFor(t, "\"poller recovered\"", func() bool { return recovered() == 1 }, nil)
	if n := errorLines(); n != 1 {
		t.Errorf("%d ERROR lines after the recovery, want 1", n)
	}
}
