package dispatcher_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/retry"
)

func TestHotPathDeliversSameEnvelopeAndMarksDone(t *testing.T) {
	h := newHarness(t, dispatcher.Config{})
	got := make(chan core.Envelope, 1)
	h.reg.RegisterFunc("OrderPaid", func(_ context.Context, env core.Envelope) error {
		got <- env
		return nil
	})
	h.start()

	// The Publish flow: insert on the transaction, EnqueueHot after commit.
	client, err := publish.New(h.st, handoff.Of(h.d, ""))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	env := h.env("OrderPaid", func(b *core.Builder) {
		b.AggregateType("Order").AggregateID("o-1").TenantID("t-1").Header("trace", "abc")
	})
	tx := testsupport.NewTx()
	id, err := client.Publish(core.ContextWithTx(context.Background(), tx), env)
	if err != nil || id != env.ID() {
		t.Fatalf("Publish = %q, %v; want %q, nil", id, err, env.ID())
	}
	if r := h.row(id); r.Status != core.StatusNew {
		t.Fatalf("before commit: row status %v, want NEW", r.Status)
	}
	select {
	case <-got:
		t.Fatal("listener ran before commit")
	default:
	}
	tx.Commit()

	delivered := recv(t, got, "the listener to receive the event")
	if !reflect.DeepEqual(delivered, env) {
		t.Fatalf("listener got %+v, want the published envelope %+v", delivered, env)
	}
	h.waitStatus(id, core.StatusDone)
	h.waitReleased(id)
	h.wait("DispatchSuccess", func() bool { return h.metrics.Success.Load() == 1 })
	if n := h.metrics.Hot.Load(); n != 1 {
		t.Errorf("HotEnqueued = %d, want 1", n)
	}
	if r := h.row(id); r.Attempts != 0 || r.LastError != "" || r.DoneAt.IsZero() {
		t.Errorf("DONE row: attempts %d last_error %q done_at %v; want 0, \"\", set", r.Attempts, r.LastError, r.DoneAt)
	}
	if n := h.metrics.Dropped.Load() + h.metrics.Failure.Load() + h.metrics.Dead.Load(); n != 0 {
		t.Errorf("unexpected metrics: %v", h.metrics)
	}
}

func TestHotQueueHasPriorityOverCold(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	g := newGate(t)
	c := &calls{}
	started := make(chan struct{}, 1)
	var first atomic.Bool
	h.reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		c.add(env.ID())
		if first.CompareAndSwap(false, true) {
			started <- struct{}{}
			<-g.ch
		}
		return nil
	})
	h.start()

	blocker := h.insert("E")
	h.mustEnqueueHot(blocker)
	recv(t, started, "the first listener to start")

	var cold, hot []string
	for range 3 {
		e := h.insert("E")
		h.mustEnqueueCold(e, 0)
		cold = append(cold, e.ID())
	}
	for range 3 {
		e := h.insert("E")
		h.mustEnqueueHot(e)
		hot = append(hot, e.ID())
	}
	if hq, cq := h.d.QueueDepths(); hq != 3 || cq != 3 {
		t.Fatalf("QueueDepths = %d, %d; want 3, 3", hq, cq)
	}
	g.open()
	h.wait("all 7 events processed", func() bool { return c.total() == 7 })

	want := append(append([]string{blocker.ID()}, hot...), cold...)
	if got := c.seq(); !slices.Equal(got, want) {
		t.Fatalf("processing order %v, want %v (hot before cold, each FIFO)", got, want)
	}
}

func TestEnqueueHotNeverBlocksWhenFull(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, HotCapacity: 1})
	g := newGate(t)
	started := make(chan struct{}, 1)
	var first atomic.Bool
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		if first.CompareAndSwap(false, true) {
			started <- struct{}{}
			<-g.ch
		}
		return nil
	})
	h.start()

	running := h.insert("E")
	h.mustEnqueueHot(running)
	recv(t, started, "the first listener to start")
	queued := h.insert("E")
	h.mustEnqueueHot(queued) // fills the one slot

	const drops = 50
	dropped := make([]core.Envelope, drops)
	for i := range dropped {
		dropped[i] = h.insert("E")
	}
	results := make(chan []bool, 1)
	go func() {
		var rs []bool
		for _, e := range dropped {
			rs = append(rs, h.enqueueHot(e))
		}
		results <- rs
	}()
	var rs []bool
	select {
	case rs = <-results:
	case <-time.After(waitTimeout):
		t.Fatal("EnqueueHot blocked on a full hot queue")
	}
	for i, ok := range rs {
		if ok {
			t.Fatalf("EnqueueHot #%d on a full queue = true, want false", i)
		}
	}
	if n := h.metrics.Dropped.Load(); n != drops {
		t.Errorf("HotDropped = %d, want %d", n, drops)
	}
	if n := h.metrics.Hot.Load(); n != 2 {
		t.Errorf("HotEnqueued = %d, want 2", n)
	}
	warns := h.logs.Lines("level=WARN", "hot queue full")
	if len(warns) < 1 || len(warns) > 2 {
		t.Fatalf("%d WARN lines for %d drops, want 1 (rate-limited, at most 2 on a slow machine):\n%s", len(warns), drops, strings.Join(warns, "\n"))
	}
	if !strings.Contains(warns[0], "occurrences=") {
		t.Errorf("WARN line lacks the occurrences attribute: %s", warns[0])
	}
	for _, e := range dropped {
		if h.d.InFlight(e.ID()) {
			t.Fatalf("dropped event %s is still in flight", e.ID())
		}
		if r := h.row(e.ID()); r.Status != core.StatusNew {
			t.Fatalf("dropped event %s: row %v, want NEW (left for the poller)", e.ID(), r.Status)
		}
	}

	g.open()
	h.waitStatus(running.ID(), core.StatusDone)
	h.waitStatus(queued.ID(), core.StatusDone)
	h.waitReleased(running.ID(), queued.ID())
	if n := h.st.Count(core.StatusNew); n != drops {
		t.Fatalf("%d NEW rows after the accepted events finished, want the %d dropped ones", n, drops)
	}
}

func TestInFlightDedupe(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	g := newGate(t)
	c := &calls{}
	started := make(chan struct{}, 1)
	var first atomic.Bool
	h.reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		c.add(env.ID())
		if first.CompareAndSwap(false, true) {
			started <- struct{}{}
			<-g.ch
		}
		return nil
	})
	h.start()

	running := h.insert("E")
	h.mustEnqueueHot(running)
	recv(t, started, "the first listener to start")
	if !h.d.InFlight(running.ID()) {
		t.Fatal("InFlight(running) = false while its listener runs")
	}
	// hot + hot: accepted as "being handled", not queued again.
	if !h.enqueueHot(running) {
		t.Error("EnqueueHot of an event already held = false, want true (it is being handled)")
	}
	// hot + cold: refused.
	if h.enqueueCold(running, 0) {
		t.Error("EnqueueCold of an event already held = true, want false")
	}

	queued := h.insert("E")
	h.mustEnqueueCold(queued, 0)
	if !h.d.InFlight(queued.ID()) {
		t.Fatal("InFlight(queued) = false while it waits in the queue")
	}
	if !h.enqueueHot(queued) {
		t.Error("EnqueueHot of a queued event = false, want true")
	}
	if h.enqueueCold(queued, 0) {
		t.Error("EnqueueCold of a queued event = true, want false")
	}
	if hq, cq := h.d.QueueDepths(); hq != 0 || cq != 1 {
		t.Fatalf("QueueDepths = %d, %d; want 0, 1 (no duplicate queued)", hq, cq)
	}

	// Sentinels queued behind any duplicate: once they are done, a
	// duplicate would have run (one worker, FIFO queues).
	sentHot, sentCold := h.insert("E"), h.insert("E")
	h.mustEnqueueHot(sentHot)
	h.mustEnqueueCold(sentCold, 0)
	g.open()
	for _, e := range []core.Envelope{running, queued, sentHot, sentCold} {
		h.waitStatus(e.ID(), core.StatusDone)
	}
	h.waitReleased(running.ID(), queued.ID(), sentHot.ID(), sentCold.ID())
	for _, e := range []core.Envelope{running, queued} {
		if n := c.count(e.ID()); n != 1 {
			t.Errorf("listener ran %d times for %s, want 1", n, e.ID())
		}
	}
	if got := c.total(); got != 4 {
		t.Errorf("%d listener calls, want 4: %v", got, c.seq())
	}
	// Released: no id stays in the in-flight set. (Whether a finished id
	// may be queued again at once is up to the tracker's memory of
	// finished ids, InFlight.Finish, not checked here.)
	for _, e := range []core.Envelope{running, queued, sentHot, sentCold} {
		if h.d.InFlight(e.ID()) {
			t.Errorf("%s still in flight after DONE; the id was not released", e.ID())
		}
	}
}

func TestListenerPanicDoesNotKillWorker(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)})
	c := &calls{}
	h.reg.RegisterFunc("Panicky", func(_ context.Context, env core.Envelope) error {
		c.add(env.ID())
		panic("kaboom")
	})
	h.reg.RegisterFunc("Fine", func(_ context.Context, env core.Envelope) error {
		c.add(env.ID())
		return nil
	})
	h.start()

	a, b := h.insert("Panicky"), h.insert("Fine")
	h.mustEnqueueHot(a)
	h.mustEnqueueHot(b)
	h.waitStatus(b.ID(), core.StatusDone)
	h.waitStatus(a.ID(), core.StatusRetry)

	ra := h.row(a.ID())
	if ra.Attempts != 1 || !strings.Contains(ra.LastError, "panicked") {
		t.Errorf("panicked event row: attempts %d last_error %q; want 1 and a message containing \"panicked\"", ra.Attempts, ra.LastError)
	}
	if got, want := c.seq(), []string{a.ID(), b.ID()}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	lines := h.logs.Lines("level=ERROR", "listener panicked")
	if len(lines) != 1 {
		t.Fatalf("%d \"listener panicked\" ERROR lines, want 1", len(lines))
	}
	if !strings.Contains(lines[0], "stack=") || !strings.Contains(lines[0], "goroutine") || !strings.Contains(lines[0], "panic") {
		t.Errorf("panic log line has no stack: %s", lines[0])
	}
	if !strings.Contains(lines[0], "event_id="+a.ID()) {
		t.Errorf("panic log line does not name the event: %s", lines[0])
	}
	if n := h.metrics.Failure.Load(); n != 1 {
		t.Errorf("DispatchFailure = %d, want 1", n)
	}
}

func TestListenerErrorMarksRetryWithPolicyDelay(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	var policyArg atomic.Int64
	policy := retry.PolicyFunc(func(attempts int) time.Duration {
		policyArg.Store(int64(attempts))
		return 42 * time.Second
	})
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: policy, Now: clock.Now})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return errors.New("downstream said no") })
	h.start()

	e := h.insert("E")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusRetry)

	r := h.row(e.ID())
	if r.Attempts != 1 {
		t.Errorf("attempts = %d, want 1", r.Attempts)
	}
	if want := clock.Now().Add(42 * time.Second); !r.AvailableAt.Equal(want) {
		t.Errorf("available_at = %v, want Now()+delay = %v", r.AvailableAt, want)
	}
	if !strings.Contains(r.LastError, "downstream said no") {
		t.Errorf("last_error = %q, want the listener's error", r.LastError)
	}
	if got := policyArg.Load(); got != 1 {
		t.Errorf("policy called with attempts %d, want 1", got)
	}
	h.wait("the in-process retry to be scheduled", func() bool { return h.d.PendingRetries() == 1 })
	if !h.d.InFlight(e.ID()) {
		t.Error("an event waiting for its in-process retry must stay in flight (the poller must skip it)")
	}
	if n := h.metrics.Failure.Load(); n != 1 {
		t.Errorf("DispatchFailure = %d, want 1", n)
	}
	if w := h.logs.Lines("level=WARN", "will retry", "event_id="+e.ID()); len(w) != 1 {
		t.Errorf("%d retry WARN lines, want 1", len(w))
	}
}

func TestInProcessRetryFiresAtBackoffDelay(t *testing.T) {
	const delay = 100 * time.Millisecond
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(delay)})
	var n atomic.Int32
	var failedAt, retriedAt atomic.Int64
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		if n.Add(1) == 1 {
			failedAt.Store(time.Now().UnixNano())
			return errors.New("transient")
		}
		retriedAt.Store(time.Now().UnixNano())
		return nil
	})
	h.start()

	e := h.insert("E")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusDone)
	h.waitReleased(e.ID())

	if got := n.Load(); got != 2 {
		t.Fatalf("listener ran %d times, want 2", got)
	}
	if got := h.d.OnTimers(); got != 0 {
		t.Errorf("OnTimers after the timer fired = %d, want 0", got)
	}
	gap := time.Duration(retriedAt.Load() - failedAt.Load())
	if gap < delay {
		t.Errorf("retry ran %v after the failure, before the %v backoff", gap, delay)
	}
	// The poller interval (5 s by default) must not be the retry floor.
	if gap >= 3*time.Second {
		t.Errorf("retry ran %v after the failure: not the in-process %v timer", gap, delay)
	}
	if r := h.row(e.ID()); r.Attempts != 1 {
		t.Errorf("attempts = %d, want 1", r.Attempts)
	}
	if h.metrics.Failure.Load() != 1 || h.metrics.Success.Load() != 1 {
		t.Errorf("metrics %v, want failure 1 success 1", h.metrics)
	}
	if n := h.d.PendingRetries(); n != 0 {
		t.Errorf("PendingRetries = %d after the retry ran", n)
	}
}

func TestDeadAtMaxAttemptsWithoutLeakingPayload(t *testing.T) {
	const secretPayload, secretHeader = "SECRET-PAYLOAD-4242", "SECRET-HEADER-7777"
	h := newHarness(t, dispatcher.Config{Workers: 1, MaxAttempts: 3, Retry: fixedDelay(time.Millisecond)})
	var n atomic.Int32
	h.reg.RegisterFunc("Charge", func(context.Context, core.Envelope) error {
		n.Add(1)
		return errors.New("card declined")
	})
	h.start()

	e := h.insert("Charge", func(b *core.Builder) {
		b.PayloadJSONString(`{"card":"`+secretPayload+`"}`).Header("authorization", secretHeader)
	})
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusDead)
	h.waitReleased(e.ID())

	if got := n.Load(); got != 3 {
		t.Errorf("listener ran %d times, want exactly MaxAttempts = 3", got)
	}
	r := h.row(e.ID())
	if r.Attempts != 3 || !strings.Contains(r.LastError, "card declined") {
		t.Errorf("DEAD row: attempts %d last_error %q; want 3 and the listener's error", r.Attempts, r.LastError)
	}
	if d, f := h.metrics.Dead.Load(), h.metrics.Failure.Load(); d != 1 || f != 2 {
		t.Errorf("DispatchDead %d DispatchFailure %d, want 1 and 2", d, f)
	}
	if h.d.PendingRetries() != 0 {
		t.Errorf("PendingRetries = %d after DEAD", h.d.PendingRetries())
	}
	dead := h.logs.Lines("level=ERROR", "DEAD", "event_id="+e.ID())
	if len(dead) != 1 {
		t.Fatalf("%d ERROR lines with DEAD, want 1:\n%s", len(dead), h.logs)
	}
	logs := h.logs.String()
	for _, secret := range []string{secretPayload, secretHeader} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains %q (payload or header value):\n%s", secret, logs)
		}
	}
}

func TestColdAttemptsCountTowardsMaxAttempts(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, MaxAttempts: 3, Retry: fixedDelay(time.Hour)})
	var n atomic.Int32
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		n.Add(1)
		return errors.New("still failing")
	})
	h.start()

	e := h.insert("E")
	// Two earlier failures recorded in the database, as the poller finds it.
	for range 2 {
		h.markRetry(e.ID(), "earlier")
	}
	h.mustEnqueueCold(e, 2)
	h.waitStatus(e.ID(), core.StatusDead)
	h.waitReleased(e.ID())
	if got := n.Load(); got != 1 {
		t.Errorf("listener ran %d times, want 1 (attempt 3 of 3)", got)
	}
	if r := h.row(e.ID()); r.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", r.Attempts)
	}
	if h.metrics.Dead.Load() != 1 || h.metrics.Cold.Load() != 1 {
		t.Errorf("metrics %v, want dead 1 coldEnqueued 1", h.metrics)
	}
}

func TestRetryCapacityDisabledLeavesRetryToPoller(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, RetryCapacity: -1, Retry: fixedDelay(time.Millisecond)})
	var n atomic.Int32
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		n.Add(1)
		return errors.New("fail")
	})
	h.start()

	e := h.insert("E")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusRetry)
	h.waitReleased(e.ID())
	if got := h.d.PendingRetries(); got != 0 {
		t.Errorf("PendingRetries = %d, want 0 with RetryCapacity -1", got)
	}
	// A sentinel behind it (one worker) proves the 1 ms retry did not
	// re-queue the event in process.
	s := h.insert("Other")
	h.mustEnqueueCold(s, 0)
	h.waitStatus(s.ID(), core.StatusDone)
	if got := n.Load(); got != 1 {
		t.Errorf("listener ran %d times, want 1 (no in-process retry)", got)
	}
	if r := h.row(e.ID()); r.Status != core.StatusRetry || r.Attempts != 1 {
		t.Errorf("row %v attempts %d, want RETRY 1", r.Status, r.Attempts)
	}
}

func TestRetryCapacityBoundsPendingTimers(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, RetryCapacity: 1, Retry: fixedDelay(time.Hour)})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return errors.New("fail") })
	h.start()

	a, b := h.insert("E"), h.insert("E")
	h.mustEnqueueHot(a)
	h.mustEnqueueHot(b)
	h.waitStatus(a.ID(), core.StatusRetry)
	h.waitStatus(b.ID(), core.StatusRetry)
	h.waitReleased(b.ID())
	if got := h.d.PendingRetries(); got != 1 {
		t.Errorf("PendingRetries = %d, want 1 (RetryCapacity)", got)
	}
	if !h.d.InFlight(a.ID()) {
		t.Error("the first event lost its retry slot")
	}
}

func TestStatusWriteFailureReleasesEvent(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2})
	var failures atomic.Int32
	h.st.Fail = func(op, _ string) error {
		if op == "done" {
			failures.Add(1)
			return errors.New("database is down")
		}
		return nil
	}
	c := &calls{}
	h.reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		c.add(env.ID())
		return nil
	})
	h.start()

	const events = 30
	ids := make([]string, 0, events)
	for range events {
		e := h.insert("E")
		h.mustEnqueueHot(e)
		ids = append(ids, e.ID())
	}
	h.wait("every listener to run", func() bool { return c.total() == events })
	h.waitReleased(ids...)
	h.wait("the DONE writes to be attempted", func() bool { return failures.Load() >= 1 })

	for _, id := range ids {
		if r := h.row(id); r.Status != core.StatusNew || r.Attempts != 0 {
			t.Fatalf("row %s: %v attempts %d, want NEW 0 (left for the poller)", id, r.Status, r.Attempts)
		}
	}
	errs := h.logs.Lines("level=ERROR", "status write failed")
	if len(errs) < 1 || len(errs) > 2 {
		t.Fatalf("%d status-write ERROR lines for %d failures, want 1 (rate-limited, at most 2 on a slow machine)", len(errs), events)
	}
	if !strings.Contains(errs[0], "database is down") || !strings.Contains(errs[0], "occurrences=") {
		t.Errorf("ERROR line lacks the cause or the occurrences count: %s", errs[0])
	}
	if h.d.PendingRetries() != 0 {
		t.Errorf("PendingRetries = %d", h.d.PendingRetries())
	}
}

func TestRetryStatusWriteFailureReleasesEvent(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Millisecond)})
	h.st.Fail = func(op, _ string) error {
		if op == "retry" {
			return errors.New("database is down")
		}
		return nil
	}
	var n atomic.Int32
	done := make(chan struct{})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		n.Add(1)
		return errors.New("fail")
	})
	h.reg.RegisterFunc("Sentinel", func(context.Context, core.Envelope) error { close(done); return nil })
	h.start()

	e := h.insert("E")
	h.mustEnqueueHot(e)
	h.waitReleased(e.ID())
	// Without a recorded RETRY row the event must not be retried in memory
	// either; the sentinel behind it proves no retry was queued.
	s := h.insert("Sentinel")
	h.mustEnqueueCold(s, 0)
	recv(t, done, "the sentinel")
	h.waitStatus(s.ID(), core.StatusDone)
	if got := n.Load(); got != 1 {
		t.Errorf("listener ran %d times, want 1", got)
	}
	if h.d.PendingRetries() != 0 {
		t.Errorf("PendingRetries = %d, want 0 after a failed RETRY write", h.d.PendingRetries())
	}
	if r := h.row(e.ID()); r.Status != core.StatusNew {
		t.Errorf("row %v, want NEW", r.Status)
	}
}

func TestNoListenerMarksDoneAndWarnsOncePerType(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2})
	h.start()

	var ids []string
	for i := range 5 {
		typ := "Ghost1"
		if i%2 == 1 {
			typ = "Ghost2"
		}
		e := h.insert(typ)
		h.mustEnqueueHot(e)
		ids = append(ids, e.ID())
	}
	for _, id := range ids {
		h.waitStatus(id, core.StatusDone)
	}
	h.waitReleased(ids...)
	warns := h.logs.Lines("level=WARN", "no listener")
	if len(warns) != 2 {
		t.Fatalf("%d no-listener WARN lines, want 2 (one per type):\n%s", len(warns), strings.Join(warns, "\n"))
	}
	for _, typ := range []string{"Ghost1", "Ghost2"} {
		if n := len(h.logs.Lines("level=WARN", "no listener", "event_type="+typ)); n != 1 {
			t.Errorf("%d WARN lines for %s, want 1", n, typ)
		}
	}
	if n := h.metrics.Success.Load(); n != 5 {
		t.Errorf("DispatchSuccess = %d, want 5", n)
	}
}

func TestListenersRunInOrderAndFirstErrorStops(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: fixedDelay(time.Hour)})
	c := &calls{}
	for _, name := range []string{"a", "b", "c"} {
		h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
			c.add(name)
			if name == "b" {
				return errors.New("b failed")
			}
			return nil
		})
	}
	h.reg.RegisterAll(core.ListenerFunc(func(context.Context, core.Envelope) error {
		c.add("wild")
		return nil
	}))
	h.start()
	e := h.insert("E")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusRetry)
	if got, want := c.seq(), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("listeners ran %v, want %v (stop at the first error)", got, want)
	}
	if r := h.row(e.ID()); !strings.Contains(r.LastError, "listener 2 of 4") || !strings.Contains(r.LastError, "b failed") {
		t.Errorf("last_error %q does not say which listener failed", r.LastError)
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[dispatcher.Source]string{
		dispatcher.SourceHot: "hot", dispatcher.SourceCold: "cold", dispatcher.SourceRetry: "retry", dispatcher.Source(99): "Source(99)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Source(%d).String() = %q, want %q", s, got, want)
		}
	}
}

func TestColdRoomAndQueueDepths(t *testing.T) {
	h := newHarness(t, dispatcher.Config{HotCapacity: 2, ColdCapacity: 3})
	// Not started: events wait in the queues.
	if got := h.d.ColdRoom(); got != 3 {
		t.Fatalf("ColdRoom = %d, want 3", got)
	}
	for i := range 3 {
		h.mustEnqueueCold(h.insert("E"), 0)
		if got := h.d.ColdRoom(); got != 2-i {
			t.Fatalf("ColdRoom = %d, want %d", got, 2-i)
		}
	}
	if h.enqueueCold(h.insert("E"), 0) {
		t.Fatal("EnqueueCold on a full cold queue = true")
	}
	h.mustEnqueueHot(h.insert("E"))
	if hq, cq := h.d.QueueDepths(); hq != 1 || cq != 3 {
		t.Fatalf("QueueDepths = %d, %d; want 1, 3", hq, cq)
	}
	if n := h.metrics.Cold.Load(); n != 3 {
		t.Errorf("ColdEnqueued = %d, want 3", n)
	}
}

// slowEnqueueCount counts like testsupport.Metrics but takes its time to
// count an enqueue, hot or cold, as a goroutine preempted on a busy
// machine does.
type slowEnqueueCount struct{ *testsupport.Metrics }

func (m slowEnqueueCount) HotEnqueued() {
	time.Sleep(50 * time.Millisecond)
	m.Metrics.HotEnqueued()
}

func (m slowEnqueueCount) ColdEnqueued() {
	time.Sleep(50 * time.Millisecond)
	m.Metrics.ColdEnqueued()
}

// An event handed to the hot queue, or enqueued by the poller, is counted
// (HotEnqueued, ColdEnqueued) before a worker can deliver it: whoever
// sees it delivered, or its row DONE, sees the count. Both were counted
// after the send, so the listener, and the DONE row, could come first.
func TestEnqueuedCountedBeforeDelivery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enqueue func(h *harness, env core.Envelope)
		count   func(m *testsupport.Metrics) int64
	}{
		{"hot", func(h *harness, env core.Envelope) { h.mustEnqueueHot(env) }, func(m *testsupport.Metrics) int64 { return m.Hot.Load() }},
		{"cold", func(h *harness, env core.Envelope) { h.mustEnqueueCold(env, 0) }, func(m *testsupport.Metrics) int64 { return m.Cold.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, dispatcher.Config{Workers: 1}, func(m *testsupport.Metrics) core.Metrics { return slowEnqueueCount{m} })
			counted := make(chan int64, 1)
			h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
				counted <- tc.count(h.metrics)
				return nil
			})
			h.start()
			tc.enqueue(h, h.insert("E"))
			if n := recv(t, counted, "the delivery"); n != 1 {
				t.Errorf("count seen by the listener = %d, want 1", n)
			}
		})
	}
}

// An event replayed right after it went DEAD (an operator's ReplayDead,
// NEW again) is taken by the next claim at once. The tracker refused a
// finished event for 5 s, so the replay waited that long on the node
// that had run it; a claim that read the row before the DEAD write is
// still refused (TestClaimFromBeforeTheOutcomeIsRefused).
func TestReplayedDeadEventTakenAgainAtOnce(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, MaxAttempts: 1})
	var calls atomic.Int32
	h.reg.RegisterFunc("E", failFirst(&calls))
	h.start()
	env := h.insert("E")
	h.mustEnqueueHot(env)
	h.waitStatus(env.ID(), core.StatusDead)
	// The worker lets the event go (Finish) after its DEAD write returned.
	testsupport.WaitFor(t, waitTimeout, "the event to be let go", func() bool { return !h.d.InFlight(env.ID()) }, nil)
	// The replay, then this node's claim of the row.
	lease := h.d.ClaimLease(h.now())
	r := h.row(env.ID())
	r.Status, r.Attempts, r.LockedBy, r.LockedUntil = core.StatusNew, 0, lease.Owner, lease.Until
	h.st.Put(r)
	h.mustEnqueueCold(env, 0)
	h.waitStatus(env.ID(), core.StatusDone)
}

// A claim that read a row before the event's outcome was written (its
// mark predates the finish) does not queue that stale copy.
func TestClaimFromBeforeTheOutcomeIsRefused(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	h.start()
	env := h.insert("E")
	mark := h.d.ClaimMark()
	h.mustEnqueueHot(env)
	h.waitStatus(env.ID(), core.StatusDone)
	testsupport.WaitFor(t, waitTimeout, "the event to be let go", func() bool { return !h.d.InFlight(env.ID()) }, nil)
	if h.d.EnqueueColdMarked(env, 0, h.d.ClaimLease(h.now()).Until, mark) {
		t.Fatal("a claim from before the DONE write queued the event again")
	}
}

// A retry policy that panics does not kill the process: the failed
// event is retried after the default policy's delay, then delivered.
func TestPanickingRetryPolicy(t *testing.T) {
	bug := retry.PolicyFunc(func(int) time.Duration { panic("a bug in the policy") })
	h := newHarness(t, dispatcher.Config{Workers: 1, Retry: bug})
	var calls atomic.Int32
	h.reg.RegisterFunc("E", failFirst(&calls))
	h.start()
	env := h.insert("E")
	h.mustEnqueueHot(env)
	h.waitStatus(env.ID(), core.StatusDone)
	if got := calls.Load(); got != 2 {
		t.Errorf("listener ran %d times, want 2", got)
	}
}

// A full hot queue counts a drop, never an enqueue, even when publishers
// race for its last places: exactly HotCapacity of them get in.
func TestHotQueueFullUnderRace(t *testing.T) {
	const capacity, publishers = 4, 16
	h := newHarness(t, dispatcher.Config{Workers: 1, HotCapacity: capacity})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	envs := make([]core.Envelope, publishers)
	for i := range envs {
		envs[i] = h.insert("E")
	}
	var wg sync.WaitGroup
	var in atomic.Int64
	for _, env := range envs {
		wg.Go(func() {
			if h.enqueueHot(env) {
				in.Add(1)
			}
		})
	}
	wg.Wait()
	if got := in.Load(); got != capacity {
		t.Errorf("accepted = %d, want %d (the capacity; not started, no worker takes any)", got, capacity)
	}
	if got, want := h.metrics.Hot.Load(), int64(capacity); got != want {
		t.Errorf("HotEnqueued = %d, want %d", got, want)
	}
	if got, want := h.metrics.Dropped.Load(), int64(publishers-capacity); got != want {
		t.Errorf("HotDropped = %d, want %d", got, want)
	}
}

// HotWaiting is true exactly while a hot event waits for a worker: queued
// before Start, queued behind a busy worker; not for cold events, dropped
// events or events a worker has taken.
func TestHotWaiting(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, HotCapacity: 2})
	g := newGate(t)
	started := make(chan struct{}, 1)
	var first atomic.Bool
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error {
		if first.CompareAndSwap(false, true) {
			started <- struct{}{}
			<-g.ch
		}
		return nil
	})
	if h.d.HotWaiting() {
		t.Fatal("HotWaiting on an empty dispatcher")
	}
	h.mustEnqueueCold(h.insert("E"), 0)
	if h.d.HotWaiting() {
		t.Fatal("HotWaiting with only a cold event queued")
	}
	running, queued := h.insert("E"), h.insert("E")
	h.mustEnqueueHot(running)
	h.mustEnqueueHot(queued)
	if !h.d.HotWaiting() {
		t.Fatal("HotWaiting = false with two hot events queued before Start")
	}
	if h.enqueueHot(h.insert("E")) {
		t.Fatal("EnqueueHot on a full hot queue = true")
	}
	h.start()
	recv(t, started, "the first listener to start")
	// The worker holds the first event; the second still waits.
	if !h.d.HotWaiting() {
		t.Fatal("HotWaiting = false while an event waits behind the busy worker")
	}
	g.open()
	h.waitStatus(running.ID(), core.StatusDone)
	h.waitStatus(queued.ID(), core.StatusDone)
	testsupport.WaitFor(t, waitTimeout, "HotWaiting to turn false", func() bool { return !h.d.HotWaiting() }, nil)
}
