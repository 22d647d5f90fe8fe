package dispatcher_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/registry"
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
	// attempts counts the attempt that hung, as the retry's WARN does (it
	// said 0 for a first attempt).
	if lines := h.logs.Lines("level=ERROR", "hung past its timeout", "attempts=1"); len(lines) == 0 {
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

// hungConfig is a dispatcher config whose watchdog gives up on a listener
// 50 ms after it started.
func hungConfig(cfg dispatcher.Config) dispatcher.Config {
	cfg.ListenerTimeout, cfg.ListenerGrace = 30*time.Millisecond, 20*time.Millisecond
	cfg.StatusTimeout, cfg.Lease = time.Second, 5*time.Second
	return cfg
}

// overlap tracks how many listener calls run at once.
type overlap struct{ running, most atomic.Int32 }

// enter counts a call in; the returned func counts it out.
func (o *overlap) enter() func() {
	n := o.running.Add(1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
	return func() { o.running.Add(-1) }
}

// The watchdog gives up on a hung listener and writes RETRY, but the event
// stays held until the stuck call returns: its retry starts only then,
// never in a second listener call on the replacement worker while the
// first is still in the listener, whether the retry is in process or left
// to this node's poller (RetryCapacity -1), which cannot take the event
// again meanwhile. The pool keeps its size; the stuck call is one
// goroutine, not one more per retry.
func TestHungListenerRetryWaitsForTheStuckCall(t *testing.T) {
	for _, tc := range []struct {
		name          string
		retryCapacity int
	}{
		{"in-process retry", 0},
		{"retry by the poller", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hungConfig(dispatcher.Config{Workers: 2, Retry: fixedDelay(time.Millisecond), RetryCapacity: tc.retryCapacity}))
			g := newGate(t)
			var calls atomic.Int32
			var ov overlap
			entered, again := make(chan struct{}, 1), make(chan struct{}, 4)
			h.reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
				defer ov.enter()()
				if calls.Add(1) == 1 {
					entered <- struct{}{}
					<-g.ch // ignores ctx on purpose
					return nil
				}
				again <- struct{}{}
				return nil
			})
			h.start()
			e := h.insert("Hang")
			h.mustEnqueueHot(e)
			recv(t, entered, "the listener to start")
			h.wait("the watchdog to give up on the call (or the event to be let go)", func() bool {
				return dispatcher.HungCalls(h.d) == 1 || len(again) > 0 || !h.d.InFlight(e.ID())
			})
			if len(again) > 0 {
				t.Fatal("the retry ran in a second listener call while the hung call was still in the listener")
			}
			if !h.d.InFlight(e.ID()) {
				t.Fatal("the event was let go while its hung listener still runs")
			}
			if h.enqueueCold(e, 1) {
				t.Fatal("EnqueueCold (this node's poller claiming its row again) took the event while its hung listener still runs")
			}
			if r := h.row(e.ID()); r.Status != core.StatusRetry || r.Attempts != 1 || !strings.Contains(r.LastError, "hung") {
				t.Fatalf("row while the listener hangs: %v attempts %d last_error %q; want RETRY 1 hung", r.Status, r.Attempts, r.LastError)
			}
			if n := h.d.PendingRetries(); n != 0 {
				t.Fatalf("%d retries waiting on a timer while the listener hangs, want 0", n)
			}
			h.wait("the replacement worker beside the stuck one", func() bool { return dispatcher.LiveWorkers(h.d) == 3 })

			g.open()
			if tc.retryCapacity < 0 {
				h.waitReleased(e.ID())
				h.mustEnqueueCold(e, 1) // this node's poller claims it again
			}
			recv(t, again, "the retry once the hung listener returned")
			h.waitStatus(e.ID(), core.StatusDone)
			if n := ov.most.Load(); n != 1 {
				t.Errorf("the event ran in %d listener calls at once, want 1", n)
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("listener called %d times, want 2", n)
			}
			if r := h.row(e.ID()); r.Attempts != 1 {
				t.Errorf("attempts %d after the retry, want 1 (the late return writes nothing)", r.Attempts)
			}
			if n := dispatcher.HungCalls(h.d); n != 0 {
				t.Errorf("%d hung calls after the listener returned, want 0", n)
			}
			h.wait("the pool back to 2 workers", func() bool { return dispatcher.LiveWorkers(h.d) == 2 })
		})
	}
}

// On its last attempt a hung listener's event is DEAD at once, written
// once, and stays held until the listener returns: an operator's replay
// meanwhile is not run alongside the stuck call by this node.
func TestHungListenerLastAttemptDeadHeldUntilReturn(t *testing.T) {
	h := newHarness(t, hungConfig(dispatcher.Config{Workers: 1, MaxAttempts: 1}))
	e, g, calls := hangFirstCall(t, h)
	h.waitStatus(e.ID(), core.StatusDead)
	h.wait("the watchdog to give up on the call (or the event to be let go)", func() bool {
		return dispatcher.HungCalls(h.d) == 1 || !h.d.InFlight(e.ID())
	})
	if !h.d.InFlight(e.ID()) {
		t.Fatal("the DEAD event was let go while its hung listener still runs")
	}
	if h.enqueueCold(e, 0) { // as if replayed, and claimed by this node
		t.Fatal("EnqueueCold took the event while its hung listener still runs")
	}
	g.open()
	h.waitReleased(e.ID())
	if r := h.row(e.ID()); r.Status != core.StatusDead || r.Attempts != 1 || !strings.Contains(r.LastError, "hung") {
		t.Fatalf("row after the late return: %v attempts %d last_error %q; want DEAD 1 hung", r.Status, r.Attempts, r.LastError)
	}
	if n := h.metrics.Dead.Load(); n != 1 {
		t.Errorf("DispatchDead = %d, want 1", n)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("listener called %d times, want 1", n)
	}
}

// Close while a hung listener is stuck: its event is still held, so the
// release of this node's leases leaves its row alone (another node must
// not deliver it alongside), and Close waits for the listener as for any
// running one. Once it returns its retry is not scheduled (closing): the
// row stays RETRY, its lease is released, and the outcome is not written
// again.
func TestHungListenerKeepsItsLeaseThroughClose(t *testing.T) {
	h := newHarness(t, hungConfig(dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)}))
	g := newGate(t)
	var calls atomic.Int32
	entered := make(chan struct{}, 1)
	h.reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		calls.Add(1)
		select {
		case entered <- struct{}{}:
		default:
		}
		<-g.ch // ignores ctx on purpose
		return nil
	})
	h.start()
	e := h.insert("Hang")
	h.mustEnqueueHot(e)
	recv(t, entered, "the listener to start")
	h.waitStatus(e.ID(), core.StatusRetry)
	h.wait("the watchdog to give up on the call (or the retry to wait on a timer)", func() bool {
		return dispatcher.HungCalls(h.d) == 1 || h.d.PendingRetries() == 1
	})
	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded (the hung listener still runs)", err)
	}
	if r := h.row(e.ID()); r.LockedBy != h.d.Owner() {
		t.Fatalf("the hung event's lease was released (%q) while its listener still runs: another node could deliver it alongside", r.LockedBy)
	}
	g.open()
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if r := h.row(e.ID()); r.Status != core.StatusRetry || r.Attempts != 1 || r.LockedBy != "" {
		t.Fatalf("row after Close: %v attempts %d locked by %q; want RETRY 1, released", r.Status, r.Attempts, r.LockedBy)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("listener called %d times, want 1", n)
	}
	if n := dispatcher.HungCalls(h.d); n != 0 {
		t.Errorf("%d hung calls after Close, want 0", n)
	}
}

// With InFlightTTL a hung listener's event may be taken again once the TTL
// passed since the watchdog's RETRY write (InFlightTTL's recovery from a
// stuck listener), and the newer run's outcome stands. The retry the hung
// call left waiting is then stale: once the listener returns, it is
// dropped without running and gives back what it held.
func TestHungListenerWithInFlightTTL(t *testing.T) {
	clock := testsupport.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarness(t, hungConfig(dispatcher.Config{Owner: "node", Workers: 2, InFlightTTL: time.Second, Now: clock.Now,
		Retry: fixedDelay(time.Millisecond)}))
	g := newGate(t)
	var calls atomic.Int32
	entered := make(chan int32, 2)
	h.reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		n := calls.Add(1)
		entered <- n
		if n == 1 {
			<-g.ch // ignores ctx on purpose
		}
		return nil
	})
	h.start()
	e := h.insert("Hang")
	h.mustEnqueueHot(e)
	recv(t, entered, "the listener to start")
	h.wait("the watchdog to give up on the call", func() bool { return dispatcher.HungCalls(h.d) == 1 })
	if h.enqueueCold(e, 1) {
		t.Fatal("EnqueueCold within InFlightTTL took the event while its hung listener still runs")
	}
	clock.Advance(2 * time.Second)
	h.mustEnqueueCold(e, 1) // past the TTL: taken again
	if n := recv(t, entered, "the newer run"); n != 2 {
		t.Fatalf("call %d entered, want 2", n)
	}
	h.waitStatus(e.ID(), core.StatusDone)

	g.open()
	h.wait("the stale retry to be dropped", func() bool {
		return h.logs.Count("waited past InFlightTTL and was taken again") == 1 && h.d.HeldBytes() == 0
	})
	if n := calls.Load(); n != 2 {
		t.Errorf("listener called %d times, want 2", n)
	}
	if r := h.row(e.ID()); r.Status != core.StatusDone || r.Attempts != 1 {
		t.Errorf("row: %v attempts %d, want DONE 1", r.Status, r.Attempts)
	}
	if n := dispatcher.HungCalls(h.d); n != 0 {
		t.Errorf("%d hung calls after the listener returned, want 0", n)
	}
}

// The same on SQLite, through the store's fenced writes and its release
// of this node's leases: the hung event's in-process retry waits for the
// stuck call, and Close keeps the event's lease until the call returned.
func TestHungListenerSQLite(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hung.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	d, err := dispatcher.New(st, reg, hungConfig(dispatcher.Config{Workers: 2, Retry: fixedDelay(time.Millisecond),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(closeCtx(t, waitTimeout)) })
	g := newGate(t) // opened before the Close above
	row := func() core.Record {
		t.Helper()
		r, err := st.Get(ctx, "hung-1")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var calls atomic.Int32
	var ov overlap
	entered, again := make(chan struct{}, 1), make(chan struct{}, 4)
	reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		defer ov.enter()()
		if calls.Add(1) == 1 {
			entered <- struct{}{}
			<-g.ch // ignores ctx on purpose
			return nil
		}
		again <- struct{}{}
		return nil
	})
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	env, err := core.NewEvent("Hang").ID("hung-1").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	lease := d.HotLease(env)
	if err := st.Insert(ctx, db, env, lease); err != nil {
		t.Fatal(err)
	}
	if !d.EnqueueHot(env, lease) {
		t.Fatal("EnqueueHot = false")
	}
	recv(t, entered, "the listener to start")
	testsupport.WaitFor(t, waitTimeout, "the watchdog to give up on the call (or the retry to run)", func() bool {
		return dispatcher.HungCalls(d) == 1 || len(again) > 0 || !d.InFlight(env.ID())
	})
	if len(again) > 0 || !d.InFlight(env.ID()) {
		t.Fatalf("the event was let go (retried: %v) while its hung listener still runs", len(again) > 0)
	}
	if r := row(); r.Status != core.StatusRetry || r.Attempts != 1 || !strings.Contains(r.LastError, "hung") {
		t.Fatalf("row while the listener hangs: %v attempts %d last_error %q; want RETRY 1 hung", r.Status, r.Attempts, r.LastError)
	}
	if err := d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded (the hung listener still runs)", err)
	}
	if r := row(); r.LockedBy != d.Owner() {
		t.Fatalf("the hung event's lease was released (%q) while its listener still runs", r.LockedBy)
	}
	g.open()
	if err := d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if r := row(); r.Status != core.StatusRetry || r.Attempts != 1 || r.LockedBy != "" {
		t.Fatalf("row after Close: %v attempts %d locked by %q; want RETRY 1, released", r.Status, r.Attempts, r.LockedBy)
	}
	if n, most := calls.Load(), ov.most.Load(); n != 1 || most != 1 {
		t.Errorf("listener called %d times, %d at once; want 1", n, most)
	}
}

// While a hung listener's call runs past the lease its RETRY write set
// (Lease after the retry is due), the dispatcher keeps renewing the row's
// lease: another node's claim does not take the event (nor, in order, the
// events after it) while the stuck call still runs. Once it returns the
// retry runs here, once.
func TestHungListenerLeaseIsRenewedWhileItRuns(t *testing.T) {
	const lease = 300 * time.Millisecond
	h, e, g, calls := hangOnRetry(t, lease)
	first := h.row(e.ID()).LockedUntil
	h.wait("the lease renewed twice past the one the RETRY write set", func() bool {
		return h.row(e.ID()).LockedUntil.After(first.Add(lease))
	})
	now := time.Now()
	if first.After(now) {
		t.Fatalf("the RETRY write's lease (%v) has not expired yet (now %v): the check below proves nothing", first, now)
	}
	recs, err := h.st.ClaimDue(context.Background(), core.ClaimRequest{Owner: "node-b", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("another node claimed %d events while the hung listener still runs", len(recs))
	}
	g.open()
	h.waitStatus(e.ID(), core.StatusDone)
	if n := calls.Load(); n != 2 {
		t.Errorf("listener called %d times, want 2 (the hung call, then its retry)", n)
	}
}

// quickHang is the configuration of the tests of a hung listener: one
// worker, a listener deemed hung 50 ms after it began, status writes of
// 100 ms at most and retries 1 ms after a failure.
func quickHang() dispatcher.Config {
	return dispatcher.Config{Workers: 1, ListenerTimeout: 30 * time.Millisecond, ListenerGrace: 20 * time.Millisecond,
		StatusTimeout: 100 * time.Millisecond, Retry: fixedDelay(time.Millisecond)}
}

// hangOnRetry runs hangFirstCall on a quickHang harness with lease and
// returns once the hung call's retry is written (RETRY).
func hangOnRetry(t *testing.T, lease time.Duration) (*harness, core.Envelope, *gate, *atomic.Int32) {
	t.Helper()
	cfg := quickHang()
	cfg.Lease = lease
	h := newHarness(t, cfg)
	e, g, calls := hangFirstCall(t, h)
	h.waitStatus(e.ID(), core.StatusRetry)
	return h, e, g, calls
}

// hangFirstCall registers a listener of type Hang whose first call
// ignores its ctx and blocks until g opens (later calls return at once),
// starts h, publishes one Hang event by the hot path and returns once its
// first call is in the listener, with the calls counted.
func hangFirstCall(t *testing.T, h *harness) (core.Envelope, *gate, *atomic.Int32) {
	t.Helper()
	g := newGate(t)
	calls := new(atomic.Int32)
	entered := make(chan struct{}, 1)
	h.reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		if calls.Add(1) == 1 {
			entered <- struct{}{}
			<-g.ch // ignores ctx on purpose
		}
		return nil
	})
	h.start()
	e := h.insert("Hang")
	h.mustEnqueueHot(e)
	recv(t, entered, "the listener to start")
	return e, g, calls
}

// A hung listener's retry whose row another node finished meanwhile (its
// lease ran out while this process was stopped, or starved, past it) is
// given up when the call returns: the renewal that changed no row used to
// set the lease all the same, so the retry ran on a lease this node no
// longer had and delivered the event again after the other node had (an
// audit stopping a node with SIGSTOP saw it on every database). The lost
// lease is counted and logged.
func TestHungListenerRetryGivenUpOnceAnotherNodeFinishedIt(t *testing.T) {
	const lease = 300 * time.Millisecond
	h, e, g, calls := hangOnRetry(t, lease)
	r := h.row(e.ID())
	r.Status, r.LockedBy = core.StatusDone, "" // another node delivered it
	h.st.Put(r)
	h.wait("the lease renewal to find the row no longer this node's", func() bool { return h.metrics.LeasesLost.Load() >= 1 })
	g.open()
	h.wait("the hung call to return and its event to be let go", func() bool { return dispatcher.HungCalls(h.d) == 0 && h.d.Held() == 0 })
	if n := calls.Load(); n != 1 {
		t.Errorf("listener called %d times, want 1: the retry ran on a lease another node had taken", n)
	}
	if r := h.row(e.ID()); r.Status != core.StatusDone {
		t.Errorf("row %v, want DONE as the other node left it", r.Status)
	}
	if n := h.logs.Count("level=WARN", "listener hangs was taken over", "event_id="+e.ID()); n != 1 {
		t.Errorf("%d WARN lines about the lost lease, want 1:\n%s", n, h.logs)
	}
}

// A watchdog that fires late (this process was stopped or starved past
// it: the listener's ctx ended during the stall too, and the listener had
// no time to see it) gives the listener one more ListenerGrace: one that
// returns within it is a plain overrun, not a hung listener. Every such
// stall logged "listener ignored its context and hung" and replaced a
// worker whose listener was fine (an audit stopping a node with SIGSTOP).
func TestLateWatchdogGivesTheListenerAnotherGrace(t *testing.T) {
	cfg := quickHang()
	cfg.ListenerGrace = time.Second
	h := newHarness(t, cfg)
	fired := make(chan struct{}, 1)
	dispatcher.SetWatchLate(h.d, func(late time.Duration) time.Duration {
		select {
		case fired <- struct{}{}:
		default:
		}
		return late + time.Minute // as after a stop of a minute
	})
	e, g, calls := hangFirstCall(t, h)
	recv(t, fired, "the watchdog to fire")
	g.open() // the listener returns within the second grace period
	h.waitStatus(e.ID(), core.StatusDone)
	if n := calls.Load(); n != 2 {
		t.Errorf("listener called %d times, want 2 (the overrun, then its retry)", n)
	}
	if r := h.row(e.ID()); !strings.Contains(r.LastError, "overran its timeout") {
		t.Errorf("last error %q, want the overrun", r.LastError)
	}
	if n := h.logs.Count("hung past its timeout"); n != 0 {
		t.Errorf("%d lines call the listener hung:\n%s", n, h.logs)
	}
	if n := dispatcher.LiveWorkers(h.d); n != 1 {
		t.Errorf("%d workers, want 1: none replaced", n)
	}
}

// A watchdog that fires late and again finds the listener running
// abandons it then: the second grace is given once.
func TestLateWatchdogAbandonsAfterTheSecondGrace(t *testing.T) {
	h := newHarness(t, quickHang())
	dispatcher.SetWatchLate(h.d, func(late time.Duration) time.Duration { return late + time.Minute })
	e, g, _ := hangFirstCall(t, h)
	h.waitStatus(e.ID(), core.StatusRetry)
	if n := h.logs.Count("level=ERROR", "hung past its timeout", "event_id="+e.ID()); n != 1 {
		t.Errorf("%d hung ERROR lines, want 1:\n%s", n, h.logs)
	}
	g.open()
	h.waitStatus(e.ID(), core.StatusDone)
}
