package dispatcher_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
	"github.com/outbox-go/outbox/retry"
)

func closeCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestCloseDeadlineCancelsListenerContext(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)})
	started := make(chan struct{}, 1)
	returned := make(chan error, 1)
	h.reg.RegisterFunc("Block", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-ctx.Done()
		returned <- ctx.Err()
		return ctx.Err()
	})
	h.start()
	e := h.insert("Block")
	h.mustEnqueueHot(e)
	recv(t, started, "the listener to start")

	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with an expiring ctx = %v, want context.DeadlineExceeded", err)
	}
	if err := recv(t, returned, "the listener's context to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("listener ctx.Err() = %v, want context.Canceled", err)
	}
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v, want nil once the workers exit", err)
	}
	h.waitReleased(e.ID())
	if err := h.d.Close(context.Background()); err != nil {
		t.Fatalf("third Close = %v, want nil", err)
	}
}

// After Close's ctx expired, events still queued must be left to the
// database: their listeners must not run (with a cancelled context) and
// their rows must not be charged a failed attempt.
func TestCloseDeadlineLeavesQueuedEventsUntouched(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)})
	started := make(chan struct{}, 1)
	h.reg.RegisterFunc("Block", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	c := &calls{}
	h.reg.RegisterFunc("Quick", func(ctx context.Context, env core.Envelope) error {
		c.add(env.ID())
		return ctx.Err()
	})
	h.start()
	blocker := h.insert("Block")
	h.mustEnqueueHot(blocker)
	recv(t, started, "the blocking listener to start")
	queued := []core.Envelope{h.insert("Quick"), h.insert("Quick"), h.insert("Quick")}
	h.mustEnqueueHot(queued[0])
	h.mustEnqueueHot(queued[1])
	h.mustEnqueueCold(queued[2], 0)

	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want context.DeadlineExceeded", err)
	}
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if n := c.total(); n != 0 {
		t.Errorf("%d queued events were run after Close's deadline (with a cancelled context): %v", n, c.seq())
	}
	for _, e := range queued {
		if r := h.row(e.ID()); r.Status != core.StatusNew || r.Attempts != 0 {
			t.Errorf("queued event %s: row %v attempts %d after the hard stop, want NEW 0 (left untouched)", e.ID(), r.Status, r.Attempts)
		}
		if h.d.InFlight(e.ID()) {
			t.Errorf("queued event %s still in flight after Close", e.ID())
		}
	}
}

// A delivery interrupted by shutdown is not the listener's failure: it must
// not consume the event's last attempt and make it DEAD.
func TestCloseDeadlineDoesNotKillEventOnLastAttempt(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, MaxAttempts: 3, Retry: fixedDelay(time.Hour)})
	started := make(chan struct{}, 1)
	h.reg.RegisterFunc("Block", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	h.start()
	e := h.insert("Block")
	for range 2 {
		h.markRetry(e.ID(), "earlier")
	}
	h.mustEnqueueCold(e, 2)
	recv(t, started, "the listener to start")

	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want context.DeadlineExceeded", err)
	}
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if r := h.row(e.ID()); r.Status == core.StatusDead {
		t.Errorf("shutdown made the event DEAD (attempts %d, last_error %q); it must stay RETRY for the next run", r.Attempts, r.LastError)
	}
	if n := h.metrics.Dead.Load(); n != 0 {
		t.Errorf("DispatchDead = %d after a shutdown interruption, want 0", n)
	}
}

func TestCloseDrainsQueuedEvents(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	g := newGate(t)
	c := &calls{}
	started := make(chan struct{}, 1)
	var first atomic.Bool
	h.reg.RegisterFunc("E", func(ctx context.Context, env core.Envelope) error {
		c.add(env.ID())
		if first.CompareAndSwap(false, true) {
			started <- struct{}{}
			<-g.ch
		}
		return ctx.Err() // fails if the drain ran with a cancelled context
	})
	h.start()
	blocker := h.insert("E")
	h.mustEnqueueHot(blocker)
	recv(t, started, "the first listener to start")
	// Mostly cold events: a worker that has seen Close picks between the
	// cold queue and the stop signal at random, so only a real drain
	// processes all ten of them.
	ids := []string{blocker.ID()}
	for i := range 12 {
		e := h.insert("E")
		if i < 2 {
			h.mustEnqueueHot(e)
		} else {
			h.mustEnqueueCold(e, 0)
		}
		ids = append(ids, e.ID())
	}

	closed := make(chan error, 1)
	go func() { closed <- h.d.Close(closeCtx(t, 10*time.Second)) }()
	testsupport.WaitFor(t, waitTimeout, "Close to stop intake", func() bool { return dispatcher.Closing(h.d) }, nil)

	// Intake is closed while the queued events still wait.
	late := h.insert("E")
	if h.enqueueHot(late) {
		t.Error("EnqueueHot after Close = true, want false")
	}
	if h.enqueueCold(late, 0) {
		t.Error("EnqueueCold after Close = true, want false")
	}
	g.open()
	if err := recv(t, closed, "Close to return"); err != nil {
		t.Fatalf("Close = %v, want nil (drained in time)", err)
	}
	for _, id := range ids {
		if r := h.row(id); r.Status != core.StatusDone {
			t.Errorf("event %s: %v after a draining Close, want DONE", id, r.Status)
		}
		if h.d.InFlight(id) {
			t.Errorf("event %s still in flight", id)
		}
	}
	if n := c.total(); n != len(ids) {
		t.Errorf("%d listener calls, want %d", n, len(ids))
	}
	if r := h.row(late.ID()); r.Status != core.StatusNew {
		t.Errorf("late event: %v, want NEW", r.Status)
	}
	if h.d.InFlight(late.ID()) {
		t.Error("a refused event is in flight")
	}
}

func TestEnqueueAfterCloseReturnsFalse(t *testing.T) {
	h := newHarness(t, dispatcher.Config{})
	h.start()
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	e := h.insert("E")
	if h.enqueueHot(e) {
		t.Error("EnqueueHot after Close = true")
	}
	if h.enqueueCold(e, 0) {
		t.Error("EnqueueCold after Close = true")
	}
	if h.d.InFlight(e.ID()) {
		t.Error("refused event is in flight")
	}
	if n := h.metrics.Dropped.Load(); n != 1 {
		t.Errorf("HotDropped = %d, want 1", n)
	}
	if err := h.d.Close(context.Background()); err != nil {
		t.Errorf("Stop after Close = %v, want nil", err)
	}
}

func TestCloseBeforeStartReleasesQueuedEvents(t *testing.T) {
	h := newHarness(t, dispatcher.Config{})
	var ran atomic.Int32
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { ran.Add(1); return nil })
	var ids []string
	for i := range 5 {
		e := h.insert("E")
		if i < 3 {
			h.mustEnqueueHot(e)
		} else {
			h.mustEnqueueCold(e, 0)
		}
		if !h.d.InFlight(e.ID()) {
			t.Fatalf("queued event %s not in flight", e.ID())
		}
		ids = append(ids, e.ID())
	}
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close before Start = %v, want nil", err)
	}
	for _, id := range ids {
		if h.d.InFlight(id) {
			t.Errorf("event %s still in flight after Close", id)
		}
		if r := h.row(id); r.Status != core.StatusNew {
			t.Errorf("event %s: %v, want NEW", id, r.Status)
		}
	}
	if hq, cq := h.d.QueueDepths(); hq != 0 || cq != 0 {
		t.Errorf("QueueDepths after Close = %d, %d", hq, cq)
	}
	if l := h.logs.Lines("stopped with queued events", "events=5"); len(l) != 1 {
		t.Errorf("want one INFO line reporting the 5 events left to the database:\n%s", h.logs)
	}
	if err := h.d.Start(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Start after Close = %v, want core.ErrClosed", err)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("listener ran %d times", n)
	}
}

func TestStartTwiceAndStartAfterClose(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2})
	h.start()
	if err := h.d.Start(context.Background()); err == nil {
		t.Fatal("second Start = nil, want an error")
	}
	// Still works after the refused Start.
	done := make(chan struct{})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { close(done); return nil })
	e := h.insert("E")
	h.mustEnqueueHot(e)
	recv(t, done, "delivery after a refused second Start")
	h.waitStatus(e.ID(), core.StatusDone)
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := h.d.Start(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}
}

// Close of a dispatcher that has finished (a Close returned nil before, or
// it never started) returns nil whatever its ctx: nothing is left to wait
// for. A done ctx raced the finished dispatcher in a select and Close
// returned ctx's error about as often as nil.
func TestCloseOfAFinishedDispatcherIsNil(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, started := range []bool{false, true} {
		for range 20 {
			h := newHarness(t, dispatcher.Config{Workers: 1})
			if started {
				h.start()
				if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
					t.Fatalf("Close = %v", err)
				}
			} else if err := h.d.Close(context.Background()); err != nil {
				t.Fatalf("Close before Start = %v", err)
			}
			if err := h.d.Close(cancelled); err != nil {
				t.Fatalf("started %v: Close again with a cancelled ctx = %v, want nil", started, err)
			}
		}
	}
}

func TestCloseCancelsPendingRetries(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2, Retry: fixedDelay(time.Hour)})
	var n atomic.Int32
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		n.Add(1)
		return errors.New("fail")
	})
	h.start()
	a, b := h.insert("E"), h.insert("E")
	h.mustEnqueueHot(a)
	h.mustEnqueueCold(b, 0)
	h.waitStatus(a.ID(), core.StatusRetry)
	h.waitStatus(b.ID(), core.StatusRetry)
	h.wait("two pending retries", func() bool { return h.d.PendingRetries() == 2 })
	if !h.d.InFlight(a.ID()) || !h.d.InFlight(b.ID()) {
		t.Fatal("events waiting for a retry are not in flight")
	}
	if got := h.d.OnTimers(); got != 2 {
		t.Errorf("OnTimers = %d, want 2 (the poller counts them out of the held rows it reads)", got)
	}
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if got := h.d.OnTimers(); got != 0 {
		t.Errorf("OnTimers after Close = %d, want 0", got)
	}
	if got := h.d.PendingRetries(); got != 0 {
		t.Errorf("PendingRetries after Close = %d, want 0", got)
	}
	if h.d.InFlight(a.ID()) || h.d.InFlight(b.ID()) {
		t.Error("Close did not release the ids of cancelled retries")
	}
	if got := n.Load(); got != 2 {
		t.Errorf("listener ran %d times, want 2", got)
	}
	for _, e := range []core.Envelope{a, b} {
		if r := h.row(e.ID()); r.Status != core.StatusRetry {
			t.Errorf("row %s: %v, want RETRY (the database keeps the retry)", e.ID(), r.Status)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	st, reg := memstore.New(nil), registry.New()
	// Counts too large fail here, not as a panic making a channel (or an
	// out-of-memory) in New, nor as DONE writes with more placeholders
	// than any database takes.
	bad := []struct {
		field string
		cfg   dispatcher.Config
	}{
		{"Workers", dispatcher.Config{Workers: -1}},
		{"Workers", dispatcher.Config{Workers: dispatcher.MaxWorkers + 1}},
		{"HotCapacity", dispatcher.Config{HotCapacity: -1}},
		{"HotCapacity", dispatcher.Config{HotCapacity: math.MaxInt}},
		{"ColdCapacity", dispatcher.Config{ColdCapacity: -5}},
		{"ColdCapacity", dispatcher.Config{ColdCapacity: dispatcher.MaxCapacity + 1}},
		{"MaxAttempts", dispatcher.Config{MaxAttempts: -1}},
		{"RetryCapacity", dispatcher.Config{RetryCapacity: -2}},
		{"RetryCapacity", dispatcher.Config{RetryCapacity: math.MaxInt}},
		{"InFlightTTL", dispatcher.Config{InFlightTTL: -time.Second}},
		{"StatusTimeout", dispatcher.Config{StatusTimeout: -time.Second}},
		{"DoneBatchSize", dispatcher.Config{DoneBatchSize: math.MaxInt}},
		{"ListenerTimeout", dispatcher.Config{ListenerTimeout: -time.Second}},
		{"Lease", dispatcher.Config{Lease: dispatcher.DefaultListenerTimeout + dispatcher.DefaultListenerGrace + dispatcher.DefaultStatusTimeout}},
		{"Owner", dispatcher.Config{Owner: strings.Repeat("x", dispatcher.MaxOwnerLen+1)}},
		// Passed, then killed the process at the first retry.
		{"Retry", dispatcher.Config{Retry: retry.PolicyFunc(nil)}},
		{"Retry", dispatcher.Config{Retry: (*retry.Exponential)(nil)}},
	}
	for _, tc := range bad {
		field, cfg := tc.field, tc.cfg
		t.Run(field, func(t *testing.T) {
			d, err := dispatcher.New(st, reg, cfg)
			if !errors.Is(err, core.ErrInvalidConfig) {
				t.Fatalf("New with invalid %s = %v, %v; want an error wrapping core.ErrInvalidConfig", field, d, err)
			}
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error %q does not name the field %s", err, field)
			}
		})
	}
	if _, err := dispatcher.New(nil, reg, dispatcher.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil store) = %v, want core.ErrInvalidConfig", err)
	}
	if _, err := dispatcher.New(st, nil, dispatcher.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil listeners) = %v, want core.ErrInvalidConfig", err)
	}
	// A nil *T store or listener source passed, then killed the process
	// at the first status write or delivery.
	if _, err := dispatcher.New((*memstore.Store)(nil), reg, dispatcher.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil *memstore.Store) = %v, want core.ErrInvalidConfig", err)
	}
	if _, err := dispatcher.New(st, (*registry.Registry)(nil), dispatcher.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil *registry.Registry) = %v, want core.ErrInvalidConfig", err)
	}
	if _, err := dispatcher.NewMulti((*registry.Registry)(nil), dispatcher.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("NewMulti(nil *registry.Registry) = %v, want core.ErrInvalidConfig", err)
	}
	if multi, err := dispatcher.NewMulti(reg, dispatcher.Config{}); err != nil {
		t.Errorf("NewMulti = %v", err)
	} else if err := multi.AddStore("x", (*memstore.Store)(nil)); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("AddStore(nil *memstore.Store) = %v, want core.ErrInvalidConfig", err)
	}
	for _, cfg := range []dispatcher.Config{{}, {RetryCapacity: -1}, {Workers: 1, HotCapacity: 1, ColdCapacity: 1, MaxAttempts: 1},
		{Workers: 16, HotCapacity: dispatcher.MaxCapacity, DoneBatchSize: dispatcher.MaxDoneBatchSize}} {
		d, err := dispatcher.New(st, reg, cfg)
		if err != nil {
			t.Errorf("New(%+v) = %v", cfg, err)
			continue
		}
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("Close of an unstarted dispatcher = %v", err)
		}
	}
}

func TestDefaultsApply(t *testing.T) {
	d, err := dispatcher.New(memstore.New(nil), registry.New(), dispatcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	// Before any size is known, ColdRoom counts events of the largest
	// size in the default MaxHeldBytes.
	if got, want := d.ColdRoom(), int(dispatcher.DefaultMaxHeldBytes/(core.MaxPayloadBytes+core.MaxHeadersBytes)); got != want {
		t.Errorf("default ColdRoom = %d, want %d", got, want)
	}
	unlimited, err := dispatcher.New(memstore.New(nil), registry.New(), dispatcher.Config{MaxHeldBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer unlimited.Close(context.Background())
	if got := unlimited.ColdRoom(); got != dispatcher.DefaultColdCapacity {
		t.Errorf("default ColdRoom without a byte budget = %d, want %d", got, dispatcher.DefaultColdCapacity)
	}
	if dispatcher.DefaultWorkers != 4 || dispatcher.DefaultHotCapacity != 1000 || dispatcher.DefaultMaxAttempts != 10 ||
		dispatcher.DefaultStatusTimeout != 5*time.Second {
		t.Errorf("defaults changed")
	}
}
