package dispatcher_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// A listener that calls runtime.Goexit (as t.FailNow or require.* do)
// fails its delivery like a panic: RETRY, an ERROR naming the event, the
// in-process retry delivers it, and the only worker was replaced, so later
// events are delivered too.
func TestListenerGoexitFailsDeliveryAndReplacesWorker(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(10 * time.Millisecond)})
	var n atomic.Int32
	h.reg.RegisterFunc("Flaky", func(context.Context, core.Envelope) error {
		if n.Add(1) == 1 {
			runtime.Goexit()
		}
		return nil
	})
	h.reg.RegisterFunc("Fine", func(context.Context, core.Envelope) error { return nil })
	h.start()

	e := h.insert("Flaky")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusDone)
	if r := h.row(e.ID()); r.Attempts != 1 || !strings.Contains(r.LastError, "Goexit") {
		t.Errorf("row after Goexit then success: attempts %d last_error %q; want 1 and a Goexit message", r.Attempts, r.LastError)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("listener called %d times, want 2", got)
	}
	next := h.insert("Fine")
	h.mustEnqueueHot(next)
	h.waitStatus(next.ID(), core.StatusDone)

	// attempts counts the attempt that failed, as the retry's WARN does.
	lines := h.logs.Lines("level=ERROR", "Goexit", "event_id="+e.ID(), "attempts=1")
	if len(lines) != 1 {
		t.Fatalf("%d ERROR lines about the Goexit naming %s, want 1", len(lines), e.ID())
	}
	if !strings.Contains(lines[0], "goexit_test.go") {
		t.Errorf("the Goexit ERROR has no stack showing the listener: %s", lines[0])
	}
	if got := h.metrics.Failure.Load(); got != 1 {
		t.Errorf("DispatchFailure = %d, want 1", got)
	}
	h.wait("the pool to be back to 1 worker", func() bool { return dispatcher.LiveWorkers(h.d) == 1 })
}

// With several workers the pool keeps its size after listeners called
// Goexit: as many listeners as Workers still run at once.
func TestListenerGoexitKeepsPoolSize(t *testing.T) {
	const workers = 3
	h := newHarness(t, dispatcher.Config{Workers: workers, Retry: fixedDelay(time.Hour)})
	h.reg.RegisterFunc("Exit", func(context.Context, core.Envelope) error { runtime.Goexit(); return nil })
	arrived := make(chan string, workers)
	all := newGate(t)
	h.reg.RegisterFunc("Meet", func(_ context.Context, env core.Envelope) error {
		arrived <- env.ID()
		<-all.ch
		return nil
	})
	h.start()

	var exits []string
	for range workers + 1 { // every worker exits at least once
		e := h.insert("Exit")
		h.mustEnqueueHot(e)
		exits = append(exits, e.ID())
	}
	for _, id := range exits {
		h.waitStatus(id, core.StatusRetry)
	}
	var meets []string
	for range workers {
		e := h.insert("Meet")
		h.mustEnqueueHot(e)
		meets = append(meets, e.ID())
	}
	for range workers { // only possible with workers goroutines alive
		recv(t, arrived, "every worker of the pool to run a listener at once")
	}
	all.open()
	for _, id := range meets {
		h.waitStatus(id, core.StatusDone)
	}
	h.wait("the pool to keep its size", func() bool { return dispatcher.LiveWorkers(h.d) == workers })
}

// A Goexit on the last attempt makes the event DEAD.
func TestListenerGoexitOnLastAttemptIsDead(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, MaxAttempts: 1})
	h.reg.RegisterFunc("Exit", func(context.Context, core.Envelope) error { runtime.Goexit(); return nil })
	h.start()
	e := h.insert("Exit")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusDead)
	if r := h.row(e.ID()); !strings.Contains(r.LastError, dispatcher.ErrListenerGoexit.Error()) {
		t.Errorf("last_error %q, want it to contain %q", r.LastError, dispatcher.ErrListenerGoexit)
	}
	h.waitReleased(e.ID())
}

// Close drains what is queued even when the only worker's listener calls
// Goexit during the drain: the replacement worker delivers the rest.
func TestCloseDrainsAfterListenerGoexit(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)})
	in := make(chan struct{}, 1)
	release := newGate(t)
	h.reg.RegisterFunc("Exit", func(context.Context, core.Envelope) error {
		in <- struct{}{}
		<-release.ch
		runtime.Goexit()
		return nil
	})
	h.reg.RegisterFunc("Fine", func(context.Context, core.Envelope) error { return nil })
	h.start()

	e := h.insert("Exit")
	h.mustEnqueueHot(e)
	recv(t, in, "the Goexit listener to start")
	var queued []string
	for range 3 {
		q := h.insert("Fine")
		h.mustEnqueueHot(q)
		queued = append(queued, q.ID())
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		closed <- h.d.Close(ctx)
	}()
	h.wait("Close to stop intake", func() bool { return dispatcher.Closing(h.d) })
	release.open()
	if err := recv(t, closed, "Close to return"); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	for _, id := range queued {
		if r := h.row(id); r.Status != core.StatusDone {
			t.Errorf("queued event %s after Close: %v, want DONE (drained)", id, r.Status)
		}
	}
	if r := h.row(e.ID()); r.Status != core.StatusRetry || r.Attempts != 1 {
		t.Errorf("Goexit event after Close: %v attempts %d, want RETRY 1", r.Status, r.Attempts)
	}
}

// A listener that hangs past its grace and then calls Goexit is recorded
// and replaced once, by the watchdog: no second outcome, no second worker.
func TestHungListenerThenGoexitIsReplacedOnce(t *testing.T) {
	h := newHarness(t, dispatcher.Config{
		Workers: 1, ListenerTimeout: 30 * time.Millisecond, ListenerGrace: 10 * time.Millisecond,
		StatusTimeout: time.Second, Lease: 5 * time.Second, Retry: fixedDelay(time.Hour),
	})
	release := newGate(t)
	exiting := make(chan struct{})
	h.reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		<-release.ch // ignores ctx on purpose
		close(exiting)
		runtime.Goexit()
		return nil
	})
	h.start()
	e := h.insert("Hang")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusRetry)
	release.open()
	recv(t, exiting, "the hung listener to call Goexit")
	h.wait("the hung worker to exit and the pool to be 1 worker", func() bool { return dispatcher.LiveWorkers(h.d) == 1 })
	if r := h.row(e.ID()); r.Attempts != 1 || !strings.Contains(r.LastError, "hung") {
		t.Errorf("row: attempts %d last_error %q; want 1 and the watchdog's error", r.Attempts, r.LastError)
	}
	if got := len(h.logs.Lines("Goexit")); got != 0 {
		t.Errorf("%d log lines about the Goexit of an abandoned listener, want 0", got)
	}
	if got := h.metrics.Failure.Load(); got != 1 {
		t.Errorf("DispatchFailure = %d, want 1", got)
	}
}
