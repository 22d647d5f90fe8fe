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

// A fault that comes and goes (a statement timeout some claims meet,
// connections cancelled now and then: polls failing and succeeding in
// turn) is one incident: one ERROR, and "poller recovered" only once the
// polls have succeeded for a while (10 intervals here). Before, each poll
// that succeeded ended the incident and the next failure began a new one:
// 15 ERROR and 15 "recovered" lines in 8 s of a 2 ms statement_timeout.
func TestFlappingFaultIsOneIncident(t *testing.T) {
	e := newPollEnv(10)
	var cycles atomic.Int32
	var flapping atomic.Bool
	flapping.Store(true)
	e.st.Fail = func(op, _ string) error {
		if op == "claim" && flapping.Load() && cycles.Add(1)%2 == 0 {
			return errors.New("canceling statement due to statement timeout")
		}
		return nil
	}
	p := e.poller(t, poller.Config{Interval: 5 * time.Millisecond})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "20 polls failing and succeeding in turn", func() bool { return cycles.Load() >= 20 }, nil)
	if n := len(e.logs.Lines("level=ERROR", "poll cycle failed")); n != 1 {
		t.Errorf("%d ERROR lines while polls fail and succeed in turn, want 1 (one incident)", n)
	}
	if n := len(e.logs.Lines("poller recovered")); n != 0 {
		t.Errorf("%d \"poller recovered\" lines while the fault comes and goes, want 0", n)
	}
	flapping.Store(false)
	waitFor(t, "\"poller recovered\" once the polls succeed", func() bool { return len(e.logs.Lines("poller recovered")) == 1 }, nil)
	if n := len(e.logs.Lines("level=ERROR", "poll cycle failed")); n != 1 {
		t.Errorf("%d ERROR lines after the recovery, want 1", n)
	}
}
