package dispatcher_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
)

// A node whose lease was taken over still runs the listener it had
// queued, but its status write is fenced off: the other node's row is left
// as it is, and the lost lease is counted and logged.
func TestFencedStatusWriteIsANoOpAndReported(t *testing.T) {
	for _, path := range []string{"done", "retry", "dead"} {
		for _, source := range []string{"hot", "cold"} {
			t.Run(path+"/"+source, func(t *testing.T) {
				cfg := dispatcher.Config{Owner: "me", Workers: 1, Retry: fixedDelay(time.Hour)}
				if path == "dead" {
					cfg.MaxAttempts = 1
				}
				h := newHarness(t, cfg)
				ran := make(chan struct{}, 1)
				h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
					ran <- struct{}{}
					if path == "done" {
						return nil
					}
					return errors.New("listener failed")
				})
				h.start()

				env := h.env("E")
				otherUntil := time.Now().Add(time.Hour)
				h.insertEnv(env, core.Lease{Owner: "other-node", Until: otherUntil})
				// This node believes it holds the event (a stale claim).
				myUntil := time.Now().Add(dispatcher.DefaultLease)
				var ok bool
				if source == "hot" {
					ok = h.d.EnqueueHot(env, core.Lease{Owner: "me", Until: myUntil})
				} else {
					ok = h.d.EnqueueCold(env, 0, myUntil)
				}
				if !ok {
					t.Fatalf("Enqueue%s = false, want true", source)
				}
				recv(t, ran, "the listener to run")
				h.wait("LeaseLost to be reported", func() bool { return h.metrics.LeasesLost.Load() >= 1 })
				h.waitReleased(env.ID())

				r := h.row(env.ID())
				if r.Status != core.StatusNew || r.Attempts != 0 || r.LastError != "" {
					t.Errorf("row %v attempts %d last_error %q; want NEW 0 \"\" (untouched)", r.Status, r.Attempts, r.LastError)
				}
				if r.LockedBy != "other-node" || !r.LockedUntil.Equal(otherUntil) {
					t.Errorf("row locked by %q until %v; want other-node until %v", r.LockedBy, r.LockedUntil, otherUntil)
				}
				if n := h.metrics.LeasesLost.Load(); n != 1 {
					t.Errorf("LeaseLost = %d, want 1", n)
				}
				warns := h.logs.Lines("level=WARN", "fenced off", "owner=me", "event_id="+env.ID(), "status="+path)
				if len(warns) != 1 {
					t.Errorf("%d WARN \"fenced off\" lines naming the owner, event and status, want 1:\n%s", len(warns), h.logs)
				}
				if n := h.d.PendingRetries(); n != 0 {
					t.Errorf("PendingRetries = %d, want 0 (no in-process retry of an event another node owns)", n)
				}
				switch path {
				case "done":
					if n := h.metrics.Success.Load(); n != 1 {
						t.Errorf("DispatchSuccess = %d, want 1", n)
					}
				case "retry":
					if n := h.metrics.Failure.Load(); n != 1 {
						t.Errorf("DispatchFailure = %d, want 1", n)
					}
				case "dead":
					// No dead letter was made: the counter (and its
					// alerts) counted one.
					if n := h.metrics.Dead.Load(); n != 0 {
						t.Errorf("DispatchDead = %d, want 0 (the DEAD write was fenced off)", n)
					}
					if n := h.logs.Count("level=ERROR", "event is DEAD"); n != 0 {
						t.Errorf("%d ERROR lines saying the event is DEAD, want 0:\n%s", n, h.logs)
					}
				}
			})
		}
	}
}

// An event inserted for another node, or unowned, is not this node's to
// deliver: every status write would be fenced off.
func TestEnqueueHotRefusesLeaseOfAnotherOwner(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Owner: "me", Workers: 1})
	c := &calls{}
	h.reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		c.add(env.ID())
		return nil
	})
	h.start()

	foreign := h.env("E")
	foreignLease := core.Lease{Owner: "other-node", Until: time.Now().Add(time.Hour)}
	h.insertEnv(foreign, foreignLease)
	unowned := h.env("E")
	h.insertEnv(unowned, core.Lease{})

	if h.d.EnqueueHot(foreign, foreignLease) {
		t.Error("EnqueueHot with another node's lease = true, want false")
	}
	if h.d.EnqueueHot(unowned, core.Lease{}) {
		t.Error("EnqueueHot with the zero lease = true, want false")
	}
	for _, e := range []core.Envelope{foreign, unowned} {
		if h.d.InFlight(e.ID()) {
			t.Errorf("refused event %s is in flight", e.ID())
		}
	}
	// A sentinel behind them (one worker) proves nothing else was queued.
	s := h.insert("E")
	h.mustEnqueueHot(s)
	h.waitStatus(s.ID(), core.StatusDone)
	if got := c.seq(); len(got) != 1 || got[0] != s.ID() {
		t.Errorf("listener calls %v, want only the sentinel %s", got, s.ID())
	}
	if r := h.row(foreign.ID()); r.Status != core.StatusNew || r.LockedBy != "other-node" {
		t.Errorf("foreign row %v locked by %q, want NEW other-node", r.Status, r.LockedBy)
	}
	if n := h.metrics.Hot.Load(); n != 1 {
		t.Errorf("HotEnqueued = %d, want 1 (the sentinel)", n)
	}
}

// counted registers a listener for type E that counts its calls.
func counted(h *harness) *calls {
	c := &calls{}
	h.reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		c.add(env.ID())
		return nil
	})
	return c
}

// coldLeased inserts an event of type E leased to owner until until and
// offers it to the cold queue with that lease.
func (h *harness) coldLeased(owner string, until time.Time) core.Envelope {
	h.t.Helper()
	env := h.env("E")
	h.insertEnv(env, core.Lease{Owner: owner, Until: until})
	if !h.d.EnqueueCold(env, 0, until) {
		h.t.Fatal("EnqueueCold = false")
	}
	return env
}

// An event whose lease ends before a listener run and a status write could
// both complete (now + ListenerTimeout + StatusTimeout > lease) has its
// lease renewed to now + Lease first, through the store, while the lease
// has not run out: with a Lease a little above ListenerTimeout +
// ListenerGrace + StatusTimeout (valid), no published event waited little
// enough to run, each was left for a new claim with the same lease, and
// none was ever delivered. One whose lease has run out is not processed:
// another node may have taken it over.
func TestEventTooCloseToLeaseEndIsRenewedOrLeft(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	h := newHarness(t, dispatcher.Config{Owner: "me", Workers: 1, Now: clock.Now})
	c := counted(h)
	budget := dispatcher.DefaultListenerTimeout + dispatcher.DefaultStatusTimeout

	// Queued with a fresh lease, then waited in the queue too long.
	stale := h.insert("E")
	h.mustEnqueueHot(stale)
	clock.Advance(dispatcher.DefaultLease - budget + time.Nanosecond)
	now := clock.Now()

	cold := func(until time.Time) core.Envelope { return h.coldLeased("me", until) }
	tight := cold(now.Add(budget - time.Nanosecond))
	ended := cold(now)                     // runs out as the worker takes it
	expired := cold(now.Add(-time.Second)) // ran out before
	exact := cold(now.Add(budget))         // exactly enough time left
	fresh := h.insert("E")
	h.mustEnqueueCold(fresh, 0)

	h.start() // one worker: stale (hot) first, then tight, ended, expired, exact, fresh
	for _, e := range []core.Envelope{stale, tight, exact, fresh} {
		h.waitStatus(e.ID(), core.StatusDone)
	}
	h.waitReleased(stale.ID(), tight.ID(), ended.ID(), expired.ID(), exact.ID(), fresh.ID())

	for _, e := range []core.Envelope{ended, expired} {
		if n := c.count(e.ID()); n != 0 {
			t.Errorf("listener ran %d times for %s, whose lease had run out", n, e.ID())
		}
		if r := h.row(e.ID()); r.Status != core.StatusNew || r.Attempts != 0 {
			t.Errorf("row %s: %v attempts %d, want NEW 0 (left for a new claim)", e.ID(), r.Status, r.Attempts)
		}
	}
	if got := c.seq(); !slices.Equal(got, []string{stale.ID(), tight.ID(), exact.ID(), fresh.ID()}) {
		t.Errorf("listener calls %v, want [%s %s %s %s]", got, stale.ID(), tight.ID(), exact.ID(), fresh.ID())
	}
	warns := h.logs.Lines("level=WARN", "waited too long", "lease_until=")
	if len(warns) < 1 || len(warns) > 2 {
		t.Fatalf("%d WARN lines for 2 skipped events, want 1 (rate-limited, at most 2 on a slow machine):\n%s", len(warns), h.logs)
	}
	if !strings.Contains(warns[0], "event_id="+ended.ID()) {
		t.Errorf("WARN line does not name the first skipped event %s: %s", ended.ID(), warns[0])
	}
	if n := h.metrics.LeasesLost.Load() + h.metrics.Failure.Load(); n != 0 {
		t.Errorf("skipped events were charged: %v", h.metrics)
	}
}

// A lease too short to run on that the store cannot renew (the row is no
// longer this node's) is left as it is, for a new claim.
func TestEventTooCloseToLeaseEndNotRenewable(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	h := newHarness(t, dispatcher.Config{Owner: "me", Workers: 1, Now: clock.Now})
	c := counted(h)
	until := clock.Now().Add(time.Second)
	taken := h.coldLeased("other-node", until) // taken over meanwhile
	fresh := h.insert("E")
	h.mustEnqueueCold(fresh, 0)
	h.start()
	h.waitStatus(fresh.ID(), core.StatusDone)
	if n := c.count(taken.ID()); n != 0 {
		t.Errorf("listener ran %d times for an event another node holds", n)
	}
	if r := h.row(taken.ID()); r.Status != core.StatusNew || r.LockedBy != "other-node" || !r.LockedUntil.Equal(until) {
		t.Errorf("row of the event another node holds: %v locked by %q until %v, want NEW, other-node, %v", r.Status, r.LockedBy, r.LockedUntil, until)
	}
}

func TestListenerTimeoutFailsTheDelivery(t *testing.T) {
	const timeout = 50 * time.Millisecond
	h := newHarness(t, dispatcher.Config{
		Workers: 1, ListenerTimeout: timeout, StatusTimeout: time.Second, Lease: 10 * time.Second,
		Retry: fixedDelay(time.Hour),
	})
	// Each listener reports its context's deadline once the context ended.
	// The dispatcher creates the context after the enqueue, so a deadline
	// of ListenerTimeout must lie at least that long after the time taken
	// before the enqueue (what the listener's own clock says about when it
	// started depends on scheduling; the deadline does not).
	deadlines := make(chan time.Time, 2)
	report := func(ctx context.Context) {
		d, ok := ctx.Deadline()
		if !ok {
			t.Error("listener context has no deadline")
		}
		if now := time.Now(); now.Before(d) {
			t.Errorf("listener context ended %v before its deadline", d.Sub(now))
		}
		deadlines <- d
	}
	h.reg.RegisterFunc("Block", func(ctx context.Context, _ core.Envelope) error {
		<-ctx.Done()
		report(ctx)
		return ctx.Err()
	})
	// Ignores its deadline: finishes after it and reports success anyway.
	h.reg.RegisterFunc("Overrun", func(ctx context.Context, _ core.Envelope) error {
		<-ctx.Done()
		report(ctx)
		return nil
	})
	h.start()

	block, overrun := h.insert("Block"), h.insert("Overrun")
	before := time.Now()
	h.mustEnqueueHot(block)
	h.mustEnqueueHot(overrun)
	for range 2 {
		if d := recv(t, deadlines, "a listener's context to expire"); d.Sub(before) < timeout {
			t.Errorf("listener context deadline %v after the enqueue, before the ListenerTimeout of %v", d.Sub(before), timeout)
		}
	}
	h.waitStatus(block.ID(), core.StatusRetry)
	h.waitStatus(overrun.ID(), core.StatusRetry)

	if r := h.row(block.ID()); r.Attempts != 1 || !strings.Contains(r.LastError, "deadline exceeded") {
		t.Errorf("blocking listener: attempts %d last_error %q; want 1 and a deadline error", r.Attempts, r.LastError)
	}
	r := h.row(overrun.ID())
	if r.Attempts != 1 || !strings.Contains(r.LastError, "overran") || !strings.Contains(r.LastError, "deadline exceeded") {
		t.Errorf("overrunning listener: attempts %d last_error %q; want 1 and an overrun error", r.Attempts, r.LastError)
	}
	if s, f := h.metrics.Success.Load(), h.metrics.Failure.Load(); s != 0 || f != 2 {
		t.Errorf("DispatchSuccess %d DispatchFailure %d, want 0 and 2", s, f)
	}
	if l := h.logs.Lines("interrupted by shutdown"); len(l) != 0 {
		t.Errorf("a listener timeout was taken for a shutdown: %v", l)
	}
}

func TestHotLeaseAndClaimLease(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	const lease = 3 * time.Minute
	h := newHarness(t, dispatcher.Config{Owner: "me", Lease: lease, Now: clock.Now})
	now := clock.Now()
	if got := h.d.Owner(); got != "me" {
		t.Fatalf("Owner = %q, want me", got)
	}
	cases := []struct {
		name      string
		notBefore time.Time
		until     time.Time
	}{
		{"immediate", time.Time{}, now.Add(lease)},
		{"delayed", now.Add(time.Hour), now.Add(time.Hour + lease)},
		{"past", now.Add(-time.Hour), now.Add(lease)},
	}
	for _, tc := range cases {
		env := h.env("E", func(b *core.Builder) { b.NotBefore(tc.notBefore) })
		got := h.d.HotLease(env)
		if got.Owner != "me" || !got.Until.Equal(tc.until) {
			t.Errorf("%s: HotLease = %+v, want {me %v}", tc.name, got, tc.until)
		}
	}
	at := now.Add(17 * time.Second)
	if got := h.d.ClaimLease(at); got.Owner != "me" || !got.Until.Equal(at.Add(lease)) {
		t.Errorf("ClaimLease(%v) = %+v, want {me %v}", at, got, at.Add(lease))
	}

	// the publishing client inserts with the HotLease: the row is this node's from
	// the insert on.
	client, err := publish.New(h.st, handoff.Of(h.d, ""))
	if err != nil {
		t.Fatal(err)
	}
	env := h.env("E")
	if _, err := client.Publish(core.ContextWithTx(context.Background(), testsupport.NewTx()), env); err != nil {
		t.Fatal(err)
	}
	if r := h.row(env.ID()); r.LockedBy != "me" || !r.LockedUntil.Equal(now.Add(lease)) {
		t.Errorf("published row locked by %q until %v, want me until %v", r.LockedBy, r.LockedUntil, now.Add(lease))
	}
}

func TestDelayedHotEventIsDeliveredInProcessWhenDue(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	deliveredAt := make(chan time.Time, 1)
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		deliveredAt <- time.Now()
		return nil
	})
	h.start()

	env := h.env("E", func(b *core.Builder) { b.NotBefore(time.Now().Add(150 * time.Millisecond)) })
	nb := env.NotBefore()
	lease := h.d.HotLease(env)
	h.insertEnv(env, lease)
	if r := h.row(env.ID()); !r.AvailableAt.Equal(nb) || !r.LockedUntil.Equal(nb.Add(dispatcher.DefaultLease)) {
		t.Errorf("row available_at %v locked until %v; want NotBefore %v and NotBefore+Lease", r.AvailableAt, r.LockedUntil, nb)
	}
	if !h.d.EnqueueHot(env, lease) {
		t.Fatal("EnqueueHot of a delayed event = false, want true (waits on a timer)")
	}
	at := recv(t, deliveredAt, "the delayed event to be delivered")
	if at.Before(nb) {
		t.Fatalf("delivered at %v, %v before its NotBefore %v", at, nb.Sub(at), nb)
	}
	// In process: no poller runs here, and its interval is seconds.
	if late := at.Sub(nb); late > 3*time.Second {
		t.Errorf("delivered %v after NotBefore: not by the in-process timer", late)
	}
	h.waitStatus(env.ID(), core.StatusDone)
	h.waitReleased(env.ID())
	if n := h.d.PendingRetries(); n != 0 {
		t.Errorf("PendingRetries = %d after delivery", n)
	}
	if n := h.metrics.Hot.Load(); n != 1 {
		t.Errorf("HotEnqueued = %d, want 1", n)
	}
}

func TestDelayedHotEventWaitsOnATimer(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	h := newHarness(t, dispatcher.Config{Workers: 1, RetryCapacity: 1, Now: clock.Now})
	c := counted(h)
	h.start()

	later := h.insert("E", func(b *core.Builder) { b.NotBefore(clock.Now().Add(time.Hour)) })
	h.mustEnqueueHot(later)
	if n := h.d.PendingRetries(); n != 1 {
		t.Fatalf("PendingRetries = %d, want 1 (the delayed event waits on a timer)", n)
	}
	if !h.d.InFlight(later.ID()) {
		t.Error("a delayed event waiting here is not in flight (the poller would queue it again)")
	}
	if hq, cq := h.d.QueueDepths(); hq != 0 || cq != 0 {
		t.Errorf("QueueDepths = %d, %d; want 0, 0", hq, cq)
	}
	// RetryCapacity 1 is used up: the next delayed event is left to the poller.
	second := h.insert("E", func(b *core.Builder) { b.NotBefore(clock.Now().Add(time.Hour)) })
	if h.enqueueHot(second) {
		t.Error("EnqueueHot of a delayed event beyond RetryCapacity = true, want false")
	}
	if h.d.InFlight(second.ID()) {
		t.Error("a refused delayed event is in flight")
	}
	// A NotBefore in the past means now.
	past := h.insert("E", func(b *core.Builder) { b.NotBefore(clock.Now().Add(-time.Hour)) })
	h.mustEnqueueHot(past)
	h.waitStatus(past.ID(), core.StatusDone)
	if got := c.seq(); len(got) != 1 || got[0] != past.ID() {
		t.Errorf("listener calls %v, want only %s", got, past.ID())
	}

	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if n := h.d.PendingRetries(); n != 0 || h.d.InFlight(later.ID()) {
		t.Errorf("after Close: PendingRetries %d, in flight %v; want 0, false", n, h.d.InFlight(later.ID()))
	}
	if r := h.row(later.ID()); r.Status != core.StatusNew {
		t.Errorf("delayed row %v after Close, want NEW (the poller delivers it when due)", r.Status)
	}
}

func TestDelayedHotEventWithoutTimersIsLeftToPoller(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, RetryCapacity: -1})
	c := counted(h)
	h.start()
	e := h.insert("E", func(b *core.Builder) { b.NotBefore(time.Now().Add(time.Hour)) })
	if h.enqueueHot(e) {
		t.Fatal("EnqueueHot of a delayed event with RetryCapacity -1 = true, want false")
	}
	if h.d.InFlight(e.ID()) || h.d.PendingRetries() != 0 {
		t.Error("a delayed event refused with RetryCapacity -1 is held")
	}
	s := h.insert("E")
	h.mustEnqueueHot(s)
	h.waitStatus(s.ID(), core.StatusDone)
	if n := c.count(e.ID()); n != 0 {
		t.Errorf("the delayed event was delivered %d times before its NotBefore", n)
	}
	if r := h.row(e.ID()); r.Status != core.StatusNew {
		t.Errorf("row %v, want NEW", r.Status)
	}
}

func TestMarkRetryKeepsLeaseUntilNextAttempt(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	const delay, lease = 42 * time.Second, 3 * time.Minute
	h := newHarness(t, dispatcher.Config{Owner: "me", Workers: 1, Lease: lease, Retry: fixedDelay(delay), Now: clock.Now})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return errors.New("fail") })
	h.start()
	e := h.insert("E")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusRetry)

	now := clock.Now()
	r := h.row(e.ID())
	if !r.AvailableAt.Equal(now.Add(delay)) {
		t.Errorf("available_at = %v, want now+delay %v", r.AvailableAt, now.Add(delay))
	}
	if r.LockedBy != "me" || !r.LockedUntil.Equal(now.Add(delay+lease)) {
		t.Errorf("locked by %q until %v; want me until nextAt+Lease = %v", r.LockedBy, r.LockedUntil, now.Add(delay+lease))
	}
	h.wait("the in-process retry to be scheduled", func() bool { return h.d.PendingRetries() == 1 })
}

func TestLeaseConfigValidation(t *testing.T) {
	st, reg := memstore.New(nil), registry.New()
	newD := func(cfg dispatcher.Config) (*dispatcher.Dispatcher, error) {
		d, err := dispatcher.New(st, reg, cfg)
		if err == nil {
			t.Cleanup(func() { _ = d.Close(context.Background()) })
		}
		return d, err
	}
	wantErr := func(name, field string, cfg dispatcher.Config) {
		t.Helper()
		_, err := newD(cfg)
		if !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want core.ErrInvalidConfig", name, err)
			return
		}
		if !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %q does not name %s", name, err, field)
		}
	}
	wantOK := func(name string, cfg dispatcher.Config) {
		t.Helper()
		if _, err := newD(cfg); err != nil {
			t.Errorf("%s: New = %v, want nil", name, err)
		}
	}

	def := dispatcher.DefaultListenerTimeout + dispatcher.DefaultListenerGrace + dispatcher.DefaultStatusTimeout
	wantErr("Lease = defaults' sum", "Lease", dispatcher.Config{Lease: def})
	wantOK("Lease just above defaults' sum", dispatcher.Config{Lease: def + time.Nanosecond})
	short := dispatcher.Config{ListenerTimeout: 50 * time.Millisecond, ListenerGrace: 5 * time.Millisecond, StatusTimeout: 10 * time.Millisecond}
	short.Lease = 65 * time.Millisecond
	wantErr("Lease = ListenerTimeout+ListenerGrace+StatusTimeout", "Lease", short)
	short.Lease = 66 * time.Millisecond
	wantOK("Lease > ListenerTimeout+ListenerGrace+StatusTimeout", short)
	wantErr("negative ListenerGrace", "ListenerGrace", dispatcher.Config{ListenerGrace: -time.Second})
	wantErr("Lease below a long ListenerTimeout", "Lease", dispatcher.Config{ListenerTimeout: 5 * time.Minute})
	wantErr("negative Lease", "Lease", dispatcher.Config{Lease: -time.Minute})

	wantErr("Owner of 65 bytes", "Owner", dispatcher.Config{Owner: strings.Repeat("x", dispatcher.MaxOwnerLen+1)})
	wantErr("Owner of 33 two-byte runes", "Owner", dispatcher.Config{Owner: strings.Repeat("é", 33)})
	wantErr("Owner with invalid UTF-8", "Owner", dispatcher.Config{Owner: "node\xff"})
	wantErr("Owner with NUL", "Owner", dispatcher.Config{Owner: "node\x00a"})
	wantErr("Owner ending with a space", "Owner", dispatcher.Config{Owner: "node-1 "})
	wantErr("Owner of spaces", "Owner", dispatcher.Config{Owner: " "})
	wantOK("Owner of 64 bytes", dispatcher.Config{Owner: strings.Repeat("x", dispatcher.MaxOwnerLen)})

	d1, err := newD(dispatcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := newD(dispatcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	o1, o2 := d1.Owner(), d2.Owner()
	if o1 == "" || o2 == "" || o1 == o2 {
		t.Errorf("default owners %q and %q; want non-empty and different per dispatcher", o1, o2)
	}
	if len(o1) > dispatcher.MaxOwnerLen {
		t.Errorf("default owner %q is %d bytes, over %d", o1, len(o1), dispatcher.MaxOwnerLen)
	}
	if dispatcher.DefaultLease != 2*time.Minute || dispatcher.DefaultListenerTimeout != 30*time.Second {
		t.Errorf("lease defaults changed")
	}
}

// A renewal that took so long (a write waiting past StatusTimeout, as
// SQLite's busy handler can) that the renewed lease no longer covers a
// listener call and its status write leaves the event for a new claim:
// the listener would run with its timeout cut to what was left, or with
// none (an attempt charged for a call that never really ran). A renewal
// within StatusTimeout leaves a whole Lease (see the smallest Lease's
// test in package outbox).
func TestSlowLeaseRenewalLeavesTheEvent(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	const lt, st = 10 * time.Second, 5 * time.Second
	h := newHarness(t, dispatcher.Config{Owner: "me", Workers: 1, Now: clock.Now, ListenerTimeout: lt, StatusTimeout: st,
		ListenerGrace: time.Millisecond, Lease: lt + st + 2*time.Millisecond})
	h.st.Fail = func(op, _ string) error {
		if op == "extend" {
			clock.Advance(st + 2*time.Second) // the write waited past StatusTimeout (SQLite's busy handler)
		}
		return nil
	}
	c := counted(h)
	until := clock.Now().Add(time.Second) // too short to run on: renewed
	env := h.coldLeased("me", until)
	h.start()
	h.waitReleased(env.ID())
	if n := c.count(env.ID()); n != 0 {
		t.Errorf("listener ran %d times on a lease renewed too late", n)
	}
	if r := h.row(env.ID()); r.Status != core.StatusNew || r.Attempts != 0 {
		t.Errorf("row %v, attempts %d; want NEW, 0 (left for a new claim)", r.Status, r.Attempts)
	}
	if n := h.logs.Count("level=WARN", "waited too long", "the renewal took so long"); n != 1 {
		t.Errorf("%d WARN lines saying the renewal took too long, want 1:\n%s", n, h.logs)
	}
}
