// Package acceptance is the end-to-end acceptance suite of the
// library's guarantees (atomicity, at-least-once delivery, ordering, recovery), written
// once against a small per-database [Harness] so every supported database
// runs the same cases. Its tests live in this package's _test files; no
// other package imports it.
package acceptance

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/retry"
	"github.com/outbox-go/outbox/txctx"
)

// Harness opens a fresh, empty database for one test. The database must
// not be shared with another test (its own file or its own schema), so the
// cases can run in parallel.
type Harness struct {
	Name string
	Open func(t *testing.T) *sqlx.DB
	// NowSQL is a query returning the database clock in UTC as text
	// "YYYY-MM-DD hh:mm:ss[.ffffff]", for the delayed-delivery checks.
	NowSQL string
}

// waitTimeout bounds every wait of the suite; generous for a loaded 2-core box.
const waitTimeout = 15 * time.Second

// Run runs every acceptance case against h.
func Run(t *testing.T, h Harness) {
	t.Run("18.1_Atomicity_RollbackLeavesNoRow", func(t *testing.T) { t.Parallel(); testAtomicity(t, h) })
	t.Run("18.1_PublishWithoutTransactionFails", func(t *testing.T) { t.Parallel(); testNoTx(t, h) })
	t.Run("18.2_CommitFastPath", func(t *testing.T) { t.Parallel(); testFastPath(t, h) })
	t.Run("18.3_QueueOverflowDowngrade", func(t *testing.T) { t.Parallel(); testOverflow(t, h) })
	t.Run("18.4_RetryThenDead", func(t *testing.T) { t.Parallel(); testRetryDead(t, h) })
	t.Run("18.5_TypeSafeEventType", func(t *testing.T) { t.Parallel(); testTypeSafeEvent(t, h) })
	t.Run("18.6_TypeSafeAggregateType", func(t *testing.T) { t.Parallel(); testTypeSafeAggregate(t, h) })
	t.Run("Delayed_InProcessTimer", func(t *testing.T) { t.Parallel(); testDelayed(t, h, false) })
	t.Run("Delayed_ByThePoller", func(t *testing.T) { t.Parallel(); testDelayed(t, h, true) })
	t.Run("Ops_ReplayedDeadEventsReachDone", func(t *testing.T) { t.Parallel(); testReplay(t, h) })
	t.Run("Close_ReleasesLeasesForTheNextOwner", func(t *testing.T) { t.Parallel(); testCloseReleasesLeases(t, h) })
	runOrdered(t, h)
}

type fixture struct {
	ob      *outbox.Outbox
	metrics *testsupport.Metrics
	db      *sqlx.DB
}

// newFixture builds an outbox on a fresh database; tweak edits the config.
// The outbox is started and closed at the end of the test.
func newFixture(t *testing.T, h Harness, start bool, tweak func(*outbox.Config)) *fixture {
	t.Helper()
	db := h.Open(t)
	m := &testsupport.Metrics{}
	cfg := outbox.Config{Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.Poller.Interval = time.Hour // cases drive the poller with PollOnce
	if tweak != nil {
		tweak(&cfg)
	}
	ob, err := outbox.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatalf("outbox.New: %v", err)
	}
	if start {
		if err := ob.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := ob.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &fixture{ob: ob, metrics: m, db: db}
}

// publish runs one transaction publishing envs; fail makes it roll back.
func (f *fixture) publish(t *testing.T, fail error, envs ...core.Envelope) error {
	t.Helper()
	return f.ob.InTx(context.Background(), func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if tx == nil {
			t.Fatal("no transaction in ctx")
		}
		for _, env := range envs {
			if _, err := f.ob.Publish(ctx, env); err != nil {
				return err
			}
		}
		return fail
	})
}

func (f *fixture) status(t *testing.T, id string) core.Record {
	t.Helper()
	rec, err := f.ob.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return rec
}

// waitStatus waits until the row reaches want, failing at the deadline.
func (f *fixture) waitStatus(t *testing.T, id string, want core.Status) core.Record {
	t.Helper()
	var rec core.Record
	waitFor(t, "event "+id+" to be "+want.String(), func() bool {
		rec = f.status(t, id)
		return rec.Status == want
	})
	return rec
}

// waitFor re-checks cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.WaitFor(t, waitTimeout, what, cond)
}

func mustEvent(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return env
}

var errBusiness = errors.New("business rule violated")

func testAtomicity(t *testing.T, h Harness) {
	f := newFixture(t, h, true, nil)
	var calls atomic.Int64
	f.ob.RegisterAll(core.ListenerFunc(func(context.Context, core.Envelope) error { calls.Add(1); return nil }))
	env := mustEvent(t, core.NewEvent("OrderPlaced").PayloadJSONString(`{"order":1}`))
	if err := f.publish(t, errBusiness, env); !errors.Is(err, errBusiness) {
		t.Fatalf("InTx error = %v, want the business error", err)
	}
	if _, err := f.ob.Get(context.Background(), env.ID()); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("row after rollback: err = %v, want ErrNotFound", err)
	}
	// afterCommit hooks run synchronously at commit: none may have run.
	if n := f.metrics.Hot.Load() + f.metrics.Dropped.Load(); n != 0 {
		t.Fatalf("hot path saw %d events of a rolled-back transaction", n)
	}
	counts, err := f.ob.CountByStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for st, n := range counts {
		if n != 0 {
			t.Fatalf("%d rows with status %v after rollback", n, st)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("listener invoked %d times for a rolled-back event", calls.Load())
	}
}

func testNoTx(t *testing.T, h Harness) {
	f := newFixture(t, h, false, nil)
	env := mustEvent(t, core.NewEvent("OrderPlaced").PayloadJSONString(`{}`))
	if _, err := f.ob.Publish(context.Background(), env); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("Publish without tx: err = %v, want ErrNoTransaction", err)
	}
	if _, err := f.ob.Get(context.Background(), env.ID()); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("a row was written without a transaction: %v", err)
	}
}

func testFastPath(t *testing.T, h Harness) {
	f := newFixture(t, h, true, func(c *outbox.Config) { c.DisablePoller = true })
	got := make(chan core.Envelope, 1)
	f.ob.RegisterFunc("UserCreated", func(_ context.Context, e core.Envelope) error { got <- e; return nil })
	env := mustEvent(t, core.NewEvent("UserCreated").AggregateType("User").AggregateID("42").
		TenantID("t1").Header("trace", "abc").PayloadJSONString(`{"name":"Ada"}`))
	if err := f.publish(t, nil, env); err != nil {
		t.Fatalf("publish: %v", err)
	}
	select {
	case e := <-got:
		if e.ID() != env.ID() || e.PayloadString() != `{"name":"Ada"}` || e.TenantID() != "t1" {
			t.Fatalf("listener got %s %q tenant %q", e.ID(), e.PayloadString(), e.TenantID())
		}
		if v, _ := e.Header("trace"); v != "abc" {
			t.Fatalf("header trace = %q", v)
		}
	case <-time.After(waitTimeout):
		t.Fatal("listener not invoked through the hot path")
	}
	rec := f.waitStatus(t, env.ID(), core.StatusDone)
	if rec.DoneAt.IsZero() {
		t.Fatal("done_at not set")
	}
	if f.metrics.Hot.Load() != 1 || f.metrics.Cold.Load() != 0 {
		t.Fatalf("hot=%d cold=%d, want the event on the hot path only", f.metrics.Hot.Load(), f.metrics.Cold.Load())
	}
}

func testOverflow(t *testing.T, h Harness) {
	f := newFixture(t, h, true, func(c *outbox.Config) {
		c.Dispatcher.Workers = 1
		c.Dispatcher.HotCapacity = 1
		c.Poller.SkipRecent = -1
	})
	entered := make(chan string, 16)
	gate := make(chan struct{})
	var mu sync.Mutex
	delivered := map[string]int{}
	f.ob.RegisterFunc("Overflow", func(_ context.Context, e core.Envelope) error {
		entered <- e.ID()
		<-gate
		mu.Lock()
		delivered[e.ID()]++
		mu.Unlock()
		return nil
	})
	// The poller's first cycle runs at Start: once it is over the poller
	// rests (Interval: an hour), so it cannot take the events below
	// between their commit and their hand-off (on a loaded machine it
	// did, and they were not dropped).
	waitFor(t, "the poller's first cycle", func() bool { return f.metrics.LagCalls.Load() > 0 })
	first := mustEvent(t, core.NewEvent("Overflow").PayloadJSONString(`{"n":0}`))
	if err := f.publish(t, nil, first); err != nil {
		t.Fatal(err)
	}
	<-entered // the only worker is now busy
	var rest []core.Envelope
	for i := 1; i <= 4; i++ {
		rest = append(rest, mustEvent(t, core.NewEvent("Overflow").PayloadJSONString(`{"n":1}`)))
	}
	// One fits the hot queue, three are dropped: Publish still succeeds.
	if err := f.publish(t, nil, rest...); err != nil {
		t.Fatalf("publish on a full hot queue must succeed: %v", err)
	}
	if d := f.metrics.Dropped.Load(); d != 3 {
		t.Fatalf("HotDropped = %d, want 3", d)
	}
	for _, e := range rest {
		if st := f.status(t, e.ID()).Status; st != core.StatusNew {
			t.Fatalf("event %s status %v, want NEW", e.ID(), st)
		}
	}
	close(gate)
	all := append([]core.Envelope{first}, rest...)
	// The poller brings the dropped rows to DONE.
	waitFor(t, "poller to deliver the dropped events", func() bool {
		if _, err := parts.Outbox(f.ob).Poller.PollOnce(context.Background()); err != nil {
			t.Fatalf("PollOnce: %v", err)
		}
		for _, e := range all {
			if f.status(t, e.ID()).Status != core.StatusDone {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for _, e := range all {
		if delivered[e.ID()] < 1 {
			t.Fatalf("event %s never delivered", e.ID())
		}
	}
	if f.metrics.Cold.Load() < 3 {
		t.Fatalf("ColdEnqueued = %d, want at least the 3 dropped events", f.metrics.Cold.Load())
	}
}

func testRetryDead(t *testing.T, h Harness) {
	f := newFixture(t, h, true, func(c *outbox.Config) {
		c.Dispatcher.MaxAttempts = 3
		c.Dispatcher.Retry = retry.PolicyFunc(func(int) time.Duration { return 10 * time.Millisecond })
		c.DisablePoller = true
	})
	calls := make(chan int, 8)
	next := make(chan struct{})
	var n atomic.Int64
	f.ob.RegisterFunc("Fails", func(context.Context, core.Envelope) error {
		k := int(n.Add(1))
		if k > 1 {
			<-next // hold attempt k until the test has looked at the row
		}
		calls <- k
		return errors.New("downstream unavailable")
	})
	env := mustEvent(t, core.NewEvent("Fails").PayloadJSONString(`{}`))
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	<-calls
	rec := f.waitStatus(t, env.ID(), core.StatusRetry)
	if rec.Attempts != 1 || rec.LastError == "" {
		t.Fatalf("after 1 failure: attempts %d, last_error %q", rec.Attempts, rec.LastError)
	}
	next <- struct{}{}
	<-calls
	waitFor(t, "attempts 2", func() bool { return f.status(t, env.ID()).Attempts == 2 })
	if st := f.status(t, env.ID()).Status; st != core.StatusRetry {
		t.Fatalf("after 2 failures status %v, want RETRY", st)
	}
	next <- struct{}{}
	<-calls
	rec = f.waitStatus(t, env.ID(), core.StatusDead)
	if rec.Attempts != 3 || rec.LastError == "" {
		t.Fatalf("DEAD row: attempts %d, last_error %q", rec.Attempts, rec.LastError)
	}
	// A DEAD event is counted once its row is (so just after a reader
	// sees it).
	waitFor(t, "the dead letter counted", func() bool { return f.metrics.Dead.Load() == 1 })
	if f.metrics.Dead.Load() != 1 || f.metrics.Failure.Load() != 2 {
		t.Fatalf("metrics dead=%d failure=%d, want 1 and 2", f.metrics.Dead.Load(), f.metrics.Failure.Load())
	}
}

// UserEvent is a type-safe event type, as an application would declare it.
type UserEvent string

func (e UserEvent) Name() string { return string(e) }

const userRegistered UserEvent = "USER_REGISTERED"

// Aggregate is a type-safe aggregate type.
type Aggregate string

func (a Aggregate) Name() string { return string(a) }

const aggregateUser Aggregate = "USER"

func testTypeSafeEvent(t *testing.T, h Harness) {
	f := newFixture(t, h, true, func(c *outbox.Config) { c.DisablePoller = true })
	got := make(chan core.Envelope, 1)
	f.ob.RegisterType(userRegistered, core.ListenerFunc(func(_ context.Context, e core.Envelope) error {
		got <- e
		return nil
	}))
	env := mustEvent(t, core.NewEventOf(userRegistered).PayloadJSONString(`{}`))
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Type() != "USER_REGISTERED" {
			t.Fatalf("type %q", e.Type())
		}
	case <-time.After(waitTimeout):
		t.Fatal("listener registered with the enum type was not invoked")
	}
	f.waitStatus(t, env.ID(), core.StatusDone)
}

func testTypeSafeAggregate(t *testing.T, h Harness) {
	f := newFixture(t, h, true, func(c *outbox.Config) { c.DisablePoller = true })
	got := make(chan core.Envelope, 1)
	f.ob.RegisterAll(core.ListenerFunc(func(_ context.Context, e core.Envelope) error { got <- e; return nil }))
	env := mustEvent(t, core.NewEvent("UserRenamed").AggregateTypeOf(aggregateUser).AggregateID("u-1").PayloadJSONString(`{}`))
	if env.AggregateType() != "USER" {
		t.Fatalf("AggregateType() = %q, want the enum name", env.AggregateType())
	}
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.AggregateType() != "USER" || e.AggregateID() != "u-1" {
			t.Fatalf("listener saw aggregate %q/%q", e.AggregateType(), e.AggregateID())
		}
	case <-time.After(waitTimeout):
		t.Fatal("listener not invoked")
	}
	if rec := f.waitStatus(t, env.ID(), core.StatusDone); rec.AggregateType != "USER" {
		t.Fatalf("stored aggregate_type %q", rec.AggregateType)
	}
}
