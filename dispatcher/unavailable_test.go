package dispatcher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
)

var errBrokerDown = errors.New("dial tcp 127.0.0.1:4222: connection refused")

// A listener returning core.Unavailable puts its event off without
// charging an attempt, even with MaxAttempts 1: the row stays NEW with 0
// attempts, unowned, due After from now, the error recorded; no failure
// or dead signal, one Postponed signal, no WARN or ERROR line.
func TestUnavailablePostponesWithoutAttempt(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	const after = 90 * time.Second
	h := newHarness(t, dispatcher.Config{Workers: 1, Now: clk.Now, MaxAttempts: 1})
	h.reg.RegisterFunc("Relay", func(context.Context, core.Envelope) error {
		return core.Unavailable(errBrokerDown, after)
	})
	h.start()
	e := h.insert("Relay")
	h.mustEnqueueHot(e)
	h.wait("the event to be put off", func() bool { r, _ := h.st.Get(e.ID()); return r.LastError != "" })
	h.waitReleased(e.ID())
	r := h.row(e.ID())
	if r.Status != core.StatusNew || r.Attempts != 0 || r.LockedBy != "" || !r.AvailableAt.Equal(clk.Now().Add(after)) {
		t.Fatalf("put-off row: %v attempts %d locked_by %q available_at %v; want NEW 0 unowned %v",
			r.Status, r.Attempts, r.LockedBy, r.AvailableAt, clk.Now().Add(after))
	}
	if !strings.Contains(r.LastError, "downstream unavailable") || !strings.Contains(r.LastError, "connection refused") {
		t.Errorf("last_error %q", r.LastError)
	}
	if n := h.metrics.Failure.Load() + h.metrics.Dead.Load() + h.metrics.Success.Load(); n != 0 {
		t.Errorf("success+failure+dead signals = %d, want 0", n)
	}
	if n := h.metrics.PostponedN.Load(); n != 1 {
		t.Errorf("Postponed signals = %d, want 1", n)
	}
	if lines := h.logs.Lines("level=WARN"); len(lines) != 0 {
		t.Errorf("WARN lines: %v", lines)
	}
	if lines := h.logs.Lines("level=ERROR"); len(lines) != 0 {
		t.Errorf("ERROR lines: %v", lines)
	}
}

// A RETRY row put off by an outage keeps its status and attempts; without
// After, the delay is the retry policy's first one.
func TestUnavailableKeepsRetryAttempts(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	h := newHarness(t, dispatcher.Config{Workers: 1, Now: clk.Now, MaxAttempts: 3, Retry: fixedDelay(7 * time.Second)})
	h.reg.RegisterFunc("Relay", func(context.Context, core.Envelope) error {
		return core.Unavailable(nil, 0)
	})
	h.start()
	e := h.insert("Relay")
	h.markRetry(e.ID(), "earlier failure")
	h.mustEnqueueCold(e, 1)
	h.wait("the event to be put off", func() bool {
		r, _ := h.st.Get(e.ID())
		return strings.Contains(r.LastError, "unavailable")
	})
	h.waitReleased(e.ID())
	r := h.row(e.ID())
	if r.Status != core.StatusRetry || r.Attempts != 1 || r.LockedBy != "" || !r.AvailableAt.Equal(clk.Now().Add(7*time.Second)) {
		t.Fatalf("put-off row: %v attempts %d locked_by %q available_at %v; want RETRY 1 unowned %v",
			r.Status, r.Attempts, r.LockedBy, r.AvailableAt, clk.Now().Add(7*time.Second))
	}
}

// A wrapped Unavailable counts too; any other error is a failed attempt.
func TestUnavailableWrappedAndOrdinaryErrors(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, MaxAttempts: 1})
	h.reg.RegisterFunc("Wrapped", func(context.Context, core.Envelope) error {
		return errors.Join(errors.New("publishing"), core.Unavailable(errBrokerDown, time.Hour))
	})
	h.reg.RegisterFunc("Rejected", func(context.Context, core.Envelope) error {
		return errors.New("no stream matches subject")
	})
	h.start()
	w, rej := h.insert("Wrapped"), h.insert("Rejected")
	h.mustEnqueueHot(w)
	h.mustEnqueueHot(rej)
	h.waitStatus(rej.ID(), core.StatusDead)
	h.wait("the wrapped one to be put off", func() bool { r, _ := h.st.Get(w.ID()); return r.LastError != "" })
	if r := h.row(w.ID()); r.Status != core.StatusNew || r.Attempts != 0 {
		t.Fatalf("wrapped Unavailable: %v attempts %d, want NEW 0", r.Status, r.Attempts)
	}
}

func TestUnavailableError(t *testing.T) {
	err := core.Unavailable(errBrokerDown, time.Second)
	if !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, errBrokerDown) {
		t.Fatalf("errors.Is fails on %v", err)
	}
	var ue *core.UnavailableError
	if !errors.As(err, &ue) || ue.After != time.Second {
		t.Fatalf("errors.As: %v %+v", err, ue)
	}
	if got, want := err.Error(), "outbox: downstream unavailable: "+errBrokerDown.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := core.Unavailable(nil, 0).Error(); got != "outbox: downstream unavailable" {
		t.Errorf("nil cause: %q", got)
	}
}

// A claim that read an event's row while the dispatcher still held it (its
// listener running) must not queue that copy once the event was put off:
// the put-off row is unowned and not due, and delivering the stale copy
// would deliver it twice (its DONE fenced off, the poller delivering it
// again). A claim that began after the release takes it.
func TestUnavailableStaleClaimNotQueued(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	running, g := make(chan struct{}, 1), newGate(t)
	h.reg.RegisterFunc("Relay", func(context.Context, core.Envelope) error {
		running <- struct{}{}
		<-g.ch
		return core.Unavailable(errBrokerDown, time.Hour)
	})
	h.start()
	e := h.insert("Relay")
	h.mustEnqueueHot(e)
	recv(t, running, "the listener")
	mark := h.d.ClaimMark() // a poller's claim reads the row now
	g.open()
	h.wait("the event to be put off", func() bool { r, _ := h.st.Get(e.ID()); return r.LastError != "" })
	h.waitReleased(e.ID())
	until := h.d.ClaimLease(time.Now()).Until
	if h.d.EnqueueColdMarked(e, 0, until, mark) {
		t.Fatal("a claim from before the put-off queued the event again")
	}
	if !h.d.EnqueueColdMarked(e, 0, until, h.d.ClaimMark()) {
		t.Fatal("a claim that began after the put-off was refused")
	}
}

// A listener that panics with a core.Unavailable error as the panic value
// failed (an attempt charged, RETRY), as every panic does: the put-off,
// meant for the error a listener returns, took it for one, for ever, and
// the event never went DEAD.
func TestPanicWithUnavailableFails(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		panic(core.Unavailable(errors.New("down"), time.Millisecond))
	})
	h.start()
	e := h.insert("E")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusRetry)
	if r := h.row(e.ID()); r.Attempts != 1 || !strings.Contains(r.LastError, "panicked") {
		t.Errorf("row: attempts %d last_error %q; want 1 and the panic", r.Attempts, r.LastError)
	}
	if n := h.metrics.PostponedN.Load(); n != 0 {
		t.Errorf("%d put-offs, want 0", n)
	}
}
