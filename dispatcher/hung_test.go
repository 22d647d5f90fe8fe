package dispatcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// A listener that ignores its ctx and never returns counts as a failure
// after ListenerTimeout + ListenerGrace, and its worker is replaced: with
// both workers hung, other events are still delivered.
func TestHungListenerIsReplacedAndFails(t *testing.T) {
	h := newHarness(t, dispatcher.Config{
		Workers: 2, ListenerTimeout: 50 * time.Millisecond, ListenerGrace: 20 * time.Millisecond,
		StatusTimeout: time.Second, Lease: 5 * time.Second, Retry: fixedDelay(time.Hour),
	})
	release := make(chan struct{})
	hungIn := make(chan string, 2)
	h.reg.RegisterFunc("Hang", func(_ context.Context, env core.Envelope) error {
		hungIn <- env.ID()
		<-release // ignores ctx on purpose
		return nil
	})
	ok := &calls{}
	h.reg.RegisterFunc("Ok", func(_ context.Context, env core.Envelope) error { ok.add(env.ID()); return nil })
	h.start()
	defer close(release) // let the stuck goroutines exit before goleak looks

	hung := []core.Envelope{h.insert("Hang"), h.insert("Hang")}
	for _, e := range hung {
		h.mustEnqueueHot(e)
	}
	<-hungIn
	<-hungIn // both original workers are now stuck
	var oks []string
	for range 5 {
		e := h.insert("Ok")
		h.mustEnqueueHot(e)
		oks = append(oks, e.ID())
	}
	for _, id := range oks {
		h.waitStatus(id, core.StatusDone)
	}
	for _, e := range hung {
		h.waitStatus(e.ID(), core.StatusRetry)
		if r := h.row(e.ID()); !strings.Contains(r.LastError, "hung") || r.Attempts != 1 {
			t.Errorf("hung event %s: attempts %d last_error %q", e.ID(), r.Attempts, r.LastError)
		}
	}
	if lines := h.logs.Lines("level=ERROR", "hung past its timeout"); len(lines) == 0 {
		t.Errorf("no ERROR about the hung listener:\n%s", h.logs)
	}
}

// A hung listener that finally returns does not record a second outcome:
// the watchdog's RETRY stands, and the event is not marked DONE by the
// late return.
func TestHungListenerLateReturnIsIgnored(t *testing.T) {
	h := newHarness(t, dispatcher.Config{
		Workers: 1, ListenerTimeout: 30 * time.Millisecond, ListenerGrace: 10 * time.Millisecond,
		StatusTimeout: time.Second, Lease: 5 * time.Second, Retry: fixedDelay(time.Hour),
	})
	release := make(chan struct{})
	returned := make(chan struct{})
	h.reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		<-release
		close(returned)
		return nil // success, but far too late
	})
	h.start()
	e := h.insert("Hang")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusRetry)
	close(release)
	<-returned
	// The event waits for its (hour-long) retry; a second, later event is
	// processed by the replacement worker, after which the late return
	// must still not have marked the hung event DONE.
	next := h.insert("Next")
	h.reg.RegisterFunc("Next", func(context.Context, core.Envelope) error { return nil })
	h.mustEnqueueHot(next)
	h.waitStatus(next.ID(), core.StatusDone)
	if r := h.row(e.ID()); r.Status != core.StatusRetry || r.Attempts != 1 {
		t.Fatalf("hung event after its late return: %v attempts %d, want RETRY 1", r.Status, r.Attempts)
	}
}
