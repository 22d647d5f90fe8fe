package dispatcher_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// supersededMsg is the WARN of a run whose outcome is discarded.
const supersededMsg = "delivery outlived InFlightTTL and the event was taken again"

// With InFlightTTL, an event whose listener is still running past the TTL
// may be taken again by the same dispatcher (its poller re-claims its own
// leased row) and run a second time. Status writes are fenced on the owner
// only, so the first (stale) run's outcome must not be written: it would
// settle the row for the second run (a delivered event recorded DEAD, or a
// DONE for a run that then fails). The stale run writes nothing, leaves the
// second run's in-flight entry alone, and is logged and counted; the second
// run's outcome stands.
func TestInFlightTTLStaleRunDoesNotSettleTheNewRun(t *testing.T) {
	failed := errors.New("listener failed")
	for _, tc := range []struct {
		name          string
		maxAttempts   int
		first, second error
		want          core.Status
		wantAttempts  int
	}{
		{"stale DEAD, new DONE", 1, failed, nil, core.StatusDone, 0},
		{"stale RETRY, new DONE", 3, failed, nil, core.StatusDone, 0},
		{"stale put off, new DONE", 3, core.Unavailable(failed, time.Minute), nil, core.StatusDone, 0},
		{"stale DONE, new DEAD", 1, nil, failed, core.StatusDead, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testsupport.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			h := newHarness(t, dispatcher.Config{Owner: "node", Workers: 2, InFlightTTL: time.Second, Now: clock.Now,
				MaxAttempts: tc.maxAttempts, Retry: fixedDelay(time.Hour)})
			entered := make(chan int, 2)
			results := []chan error{make(chan error, 1), make(chan error, 1)}
			t.Cleanup(func() { // a failed test does not leave a listener waiting for Close
				for _, r := range results {
					select {
					case r <- nil:
					default:
					}
				}
			})
			var n atomic.Int32
			h.reg.Register("T", core.ListenerFunc(func(context.Context, core.Envelope) error {
				i := int(n.Add(1) - 1)
				entered <- i
				return <-results[i]
			}))
			h.start()
			env := h.insert("T")
			h.mustEnqueueHot(env)
			recv(t, entered, "first run")
			clock.Advance(2 * time.Second) // the in-flight entry is older than InFlightTTL; the lease (2 min) holds
			h.mustEnqueueCold(env, 0)      // the poller re-claims its own leased row
			recv(t, entered, "second run")

			results[0] <- tc.first // the first run ends while the second still runs
			h.wait("the first run's outcome to be discarded or written", func() bool {
				r, _ := h.st.Get(env.ID())
				written := r.Status != core.StatusNew || r.LastError != "" || r.LockedBy != "node"
				return written || h.metrics.LeasesLost.Load() > 0 && h.d.Held() == 1
			})
			if r := h.row(env.ID()); r.Status != core.StatusNew || r.Attempts != 0 || r.LastError != "" || r.LockedBy != "node" {
				t.Fatalf("the stale run wrote its outcome: row is %v, attempts %d, last error %q, locked by %q; want NEW, 0, \"\", node",
					r.Status, r.Attempts, r.LastError, r.LockedBy)
			}
			if !h.d.InFlight(env.ID()) || h.d.Held() != 1 {
				t.Fatalf("after the stale run: InFlight = %v, Held = %d; want true, 1 (the second run's)", h.d.InFlight(env.ID()), h.d.Held())
			}
			if got := h.metrics.LeasesLost.Load(); got != 1 {
				t.Errorf("LeaseLost counted %d, want 1 (the stale run)", got)
			}
			if got := h.logs.Count("level=WARN", supersededMsg, "event_id="+env.ID()); got != 1 {
				t.Errorf("%d WARN lines about the stale run, want 1", got)
			}

			results[1] <- tc.second
			h.waitStatus(env.ID(), tc.want)
			h.waitReleased(env.ID())
			if r := h.row(env.ID()); r.Attempts != tc.wantAttempts {
				t.Errorf("row %s is %v with %d attempts (last error %q), want %d", env.ID(), r.Status, r.Attempts, r.LastError, tc.wantAttempts)
			}
			h.wait("nothing held after both runs", func() bool { return h.d.Held() == 0 && h.d.HeldBytes() == 0 })
			if n := h.d.PendingRetries(); n != 0 {
				t.Errorf("PendingRetries = %d after both runs, want 0", n)
			}
		})
	}
}

// Once a run began writing its outcome, InFlightTTL no longer lets the
// event be taken again, however long the write takes: no second run can
// start between the check and the write (DEAD written on its own, DONE
// through the coalesced batch).
func TestInFlightTTLSettlingEventIsNotTakenAgain(t *testing.T) {
	for _, tc := range []struct {
		op     string
		result error
		want   core.Status
	}{
		{"dead", errors.New("listener failed"), core.StatusDead},
		{"done", nil, core.StatusDone},
	} {
		t.Run(tc.op, func(t *testing.T) {
			clock := testsupport.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			h := newHarness(t, dispatcher.Config{Owner: "node", Workers: 2, InFlightTTL: time.Second, Now: clock.Now, MaxAttempts: 1})
			writing := make(chan struct{}, 1)
			g := newGate(t)
			h.st.Fail = func(op, _ string) error {
				if op == tc.op {
					writing <- struct{}{}
					<-g.ch
				}
				return nil
			}
			var calls calls
			h.reg.Register("T", core.ListenerFunc(func(_ context.Context, env core.Envelope) error {
				calls.add(env.ID())
				return tc.result
			}))
			h.start()
			env := h.insert("T")
			h.mustEnqueueHot(env)
			recv(t, writing, "the outcome write")
			clock.Advance(time.Hour) // far past InFlightTTL, the write still in progress
			if h.enqueueCold(env, 0) {
				t.Fatal("EnqueueCold took the event again while its outcome was being written")
			}
			if !h.d.InFlight(env.ID()) {
				t.Fatal("InFlight = false while the outcome is being written")
			}
			g.open()
			h.waitStatus(env.ID(), tc.want)
			h.waitReleased(env.ID())
			if n := calls.count(env.ID()); n != 1 {
				t.Errorf("listener called %d times, want 1", n)
			}
			if got := h.metrics.LeasesLost.Load(); got != 0 {
				t.Errorf("LeaseLost counted %d, want 0", got)
			}
		})
	}
}

// A copy of an event that waited in a queue past InFlightTTL, while the
// event was taken again, is left to the newer copy: the listener runs
// once.
func TestInFlightTTLStaleQueuedCopyIsNotRun(t *testing.T) {
	clock := testsupport.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarness(t, dispatcher.Config{Owner: "node", Workers: 1, InFlightTTL: time.Second, Now: clock.Now})
	g := newGate(t)
	busy := make(chan struct{}, 1)
	var calls calls
	h.reg.Register("Block", core.ListenerFunc(func(context.Context, core.Envelope) error {
		busy <- struct{}{}
		<-g.ch
		return nil
	}))
	h.reg.Register("T", core.ListenerFunc(func(_ context.Context, env core.Envelope) error {
		calls.add(env.ID())
		return nil
	}))
	h.start()
	blocker := h.insert("Block")
	h.mustEnqueueHot(blocker)
	recv(t, busy, "the only worker to be busy")
	env := h.insert("T")
	h.mustEnqueueHot(env) // queued behind the blocker
	clock.Advance(2 * time.Second)
	h.mustEnqueueCold(env, 0) // taken again: a second, newer copy queued
	g.open()
	h.waitStatus(env.ID(), core.StatusDone)
	h.waitReleased(env.ID(), blocker.ID())
	if n := calls.count(env.ID()); n != 1 {
		t.Errorf("listener called %d times for %s, want 1 (the stale copy must not run)", n, env.ID())
	}
	h.wait("nothing held", func() bool { return h.d.Held() == 0 && h.d.HeldBytes() == 0 })
	if got := h.logs.Count("level=WARN", "event waited past InFlightTTL", "event_id="+env.ID()); got != 1 {
		t.Errorf("%d WARN lines about the stale copy, want 1", got)
	}
}

// With InFlightTTL, an event whose run is still in its listener past the
// TTL may be taken again; when that new take is undone before its copy
// runs (the queue it was offered to is full, its payload does not fit in
// MaxHeldBytes, or the copy waited too long in the queue for its lease),
// the first run still holds the event: its outcome is written, not
// discarded as a stale run's.
func TestInFlightTTLUndoneRetakeLeavesTheEventToTheFirstRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  dispatcher.Config
		// retake has the held event taken again while the first run is
		// in its listener, and that take undone.
		retake func(h *harness, env core.Envelope, g *gate, blocked <-chan struct{})
		// noRenewal makes the store refuse to renew leases.
		noRenewal bool
	}{
		{"cold queue full", dispatcher.Config{Workers: 1, ColdCapacity: 1}, func(h *harness, env core.Envelope, _ *gate, _ <-chan struct{}) {
			h.mustEnqueueCold(h.insert("F"), 0) // waits for the only worker
			if h.enqueueCold(env, 0) {
				h.t.Fatal("EnqueueCold took the event again into a full cold queue")
			}
		}, false},
		{"hot queue full", dispatcher.Config{Workers: 1, HotCapacity: 1}, func(h *harness, env core.Envelope, _ *gate, _ <-chan struct{}) {
			h.mustEnqueueHot(h.insert("F")) // waits for the only worker
			if h.enqueueHot(env) {
				h.t.Fatal("EnqueueHot took the event again into a full hot queue")
			}
		}, false},
		{"over MaxHeldBytes", dispatcher.Config{Workers: 1, MaxHeldBytes: 1}, func(h *harness, env core.Envelope, _ *gate, _ <-chan struct{}) {
			if h.enqueueCold(env, 0) {
				h.t.Fatal("EnqueueCold took the event again over MaxHeldBytes")
			}
		}, false},
		{"lease too short for the newer copy, not renewed", dispatcher.Config{Workers: 2}, func(h *harness, env core.Envelope, g *gate, blocked <-chan struct{}) {
			h.mustEnqueueHot(h.insert("B")) // the second worker blocks on it
			recv(h.t, blocked, "the second worker to be busy")
			if !h.d.EnqueueCold(env, 0, h.now().Add(time.Second)) {
				h.t.Fatal("EnqueueCold of the event taken again = false, want true")
			}
			g.open() // the second worker takes the newer copy and lets it go for its lease
			h.wait("the newer copy to be let go for its lease", func() bool {
				return h.logs.Count("level=WARN", "event waited too long for its lease", "event_id="+env.ID()) == 1
			})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testsupport.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg := tc.cfg
			cfg.Owner, cfg.InFlightTTL, cfg.Now = "node", time.Second, clock.Now
			h := newHarness(t, cfg)
			if tc.noRenewal {
				h.st.Fail = func(op, _ string) error {
					if op == "extend" {
						return errors.New("test: no lease renewal")
					}
					return nil
				}
			}
			g, blocked := newGate(t), make(chan struct{}, 1)
			entered, result := make(chan struct{}, 1), make(chan error, 1)
			t.Cleanup(func() { // a failed test does not leave the listener waiting for Close
				select {
				case result <- nil:
				default:
				}
			})
			var calls calls
			h.reg.Register("T", core.ListenerFunc(func(_ context.Context, env core.Envelope) error {
				calls.add(env.ID())
				entered <- struct{}{}
				return <-result
			}))
			h.reg.Register("B", core.ListenerFunc(func(context.Context, core.Envelope) error {
				blocked <- struct{}{}
				<-g.ch
				return nil
			}))
			h.reg.RegisterFunc("F", func(context.Context, core.Envelope) error { return nil })
			h.start()
			env := h.insert("T")
			h.mustEnqueueHot(env)
			recv(t, entered, "the first run")
			clock.Advance(2 * time.Second) // the in-flight entry is older than InFlightTTL; the lease (2 min) holds
			tc.retake(h, env, g, blocked)

			result <- nil // the first run, the only one, succeeds
			h.wait("the run's outcome to be written or discarded", func() bool {
				r, _ := h.st.Get(env.ID())
				return r.Status != core.StatusNew || h.metrics.LeasesLost.Load() > 0
			})
			if r := h.row(env.ID()); r.Status != core.StatusDone {
				t.Fatalf("row is %v, locked by %q, after the only run succeeded; want DONE (LeaseLost %d)",
					r.Status, r.LockedBy, h.metrics.LeasesLost.Load())
			}
			h.waitReleased(env.ID())
			g.open()
			h.wait("nothing held", func() bool { return h.d.Held() == 0 && h.d.HeldBytes() == 0 })
			if n := calls.count(env.ID()); n != 1 {
				t.Errorf("listener called %d times, want 1", n)
			}
			if got := h.metrics.LeasesLost.Load(); got != 0 {
				t.Errorf("LeaseLost counted %d, want 0", got)
			}
			if got := h.logs.Count(supersededMsg); got != 0 {
				t.Errorf("%d WARN lines about a stale run, want 0", got)
			}
		})
	}
}
