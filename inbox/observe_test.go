package inbox_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// recorder is a core.InboxObserver that remembers every processing.
type recorder struct {
	mu   sync.Mutex
	seen []observed
}

type observed struct {
	msg    core.InboxMessage
	result core.InboxResult
	ended  int
}

type obsKey struct{}

func (r *recorder) ProcessInbox(ctx context.Context, m core.InboxMessage) (context.Context, func(core.InboxResult)) {
	r.mu.Lock()
	i := len(r.seen)
	r.seen = append(r.seen, observed{msg: m})
	r.mu.Unlock()
	return context.WithValue(ctx, obsKey{}, i), func(res core.InboxResult) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.seen[i].result = res
		r.seen[i].ended++
	}
}

func (r *recorder) all() []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observed(nil), r.seen...)
}

// checkOne checks the i-th processing: ended exactly once, with outcome.
func (r *recorder) checkOne(t *testing.T, i int, mode core.InboxMode, outcome core.InboxOutcome) observed {
	t.Helper()
	all := r.all()
	if len(all) <= i {
		t.Fatalf("%d processings observed, want at least %d", len(all), i+1)
	}
	o := all[i]
	if o.ended != 1 {
		t.Errorf("processing %d ended %d times, want once", i, o.ended)
	}
	if o.msg.Mode != mode || o.result.Outcome != outcome {
		t.Errorf("processing %d: mode %v outcome %v, want %v %v (%+v)", i, o.msg.Mode, o.result.Outcome, mode, outcome, o)
	}
	return o
}

// ProcessTx and Process report each call: processed, then duplicate on a
// redelivery, failed when the business function fails; the function runs
// with the observer's context.
func TestObserverTransactional(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	msg := inbox.Message{Source: "billing", MessageID: "m-1", Topic: "invoice.paid"}
	var fnCtx context.Context
	fn := func(ctx context.Context, _ *sqlx.Tx) error { fnCtx = ctx; return nil }
	if ok, err := e.in.Process(e.ctx, msg, fn); !ok || err != nil {
		t.Fatal(ok, err)
	}
	o := rec.checkOne(t, 0, core.InboxTransactional, core.InboxProcessed)
	if o.result.NotRun {
		t.Error("processed, yet NotRun")
	}
	if o.msg.Source != "billing" || o.msg.MessageID != "m-1" || o.msg.Topic != "invoice.paid" || o.msg.Attempt != 0 || !o.msg.Enqueued.IsZero() {
		t.Errorf("message = %+v", o.msg)
	}
	if fnCtx == nil || fnCtx.Value(obsKey{}) != 0 {
		t.Error("the business function did not get the observer's context")
	}
	if ok, err := e.in.Process(e.ctx, msg, fn); ok || err != nil {
		t.Fatal(ok, err)
	}
	rec.checkOne(t, 1, core.InboxTransactional, core.InboxDuplicate)

	boom := errors.New("boom")
	msg.MessageID = "m-2"
	if _, err := e.in.Process(e.ctx, msg, func(context.Context, *sqlx.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if o := rec.checkOne(t, 2, core.InboxTransactional, core.InboxFailed); !errors.Is(o.result.Err, boom) || o.result.NotRun {
		t.Errorf("failed result = %+v, want Err boom and the function run", o.result)
	}
	// A message leased to a worker: ErrInProgress before the function runs.
	e.enqueue(inbox.Message{Source: "billing", MessageID: "leased"})
	if got := e.claim("w", time.Minute, 10); len(got) != 1 {
		t.Fatalf("claimed %d, want 1", len(got))
	}
	leased := inbox.Message{Source: "billing", MessageID: "leased"}
	if _, err := e.in.Process(e.ctx, leased, fn); !errors.Is(err, inbox.ErrInProgress) {
		t.Fatalf("Process of a leased message = %v, want ErrInProgress", err)
	}
	if o := rec.checkOne(t, 3, core.InboxTransactional, core.InboxFailed); !o.result.NotRun || o.result.Took != 0 {
		t.Errorf("in progress result = %+v, want NotRun and no time", o.result)
	}
	// A message refused before anything runs is not observed.
	if _, err := e.in.Process(e.ctx, inbox.Message{MessageID: "no-source"}, fn); err == nil {
		t.Fatal("a message without a source was accepted")
	}
	if n := len(rec.all()); n != 4 {
		t.Errorf("%d processings observed, want 4", n)
	}
}

// A dispatcher reports each handling with its attempt, the enqueue time
// and the decided outcome: processed, retry, dead, unhandled. The
// dispatcher inherits the inbox's observer.
func TestObserverQueued(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", MaxAttempts: 2})
	var handlerCtx context.Context
	mustHandle(t, d, "ok", func(ctx context.Context, _ inbox.Record) error { handlerCtx = ctx; return nil })
	failure := errors.New("downstream unavailable")
	mustHandle(t, d, "fails", func(context.Context, inbox.Record) error { return failure })
	enqueuedAt := e.clock.Now()
	e.enqueue(inbox.Message{Source: "s", MessageID: "ok-1", Topic: "ok", Payload: []byte("{}")})
	run := func(want int) {
		t.Helper()
		if n, err := d.RunOnce(e.ctx); err != nil || n != want {
			t.Fatalf("RunOnce = %d, %v; want %d", n, err, want)
		}
	}
	run(1)
	o := rec.checkOne(t, 0, core.InboxQueued, core.InboxProcessed)
	if o.msg.Topic != "ok" || o.msg.Attempt != 1 || o.msg.Store != "" || !o.msg.Enqueued.Equal(enqueuedAt) || o.result.Err != nil {
		t.Errorf("processed: %+v", o)
	}
	if handlerCtx == nil || handlerCtx.Value(obsKey{}) != 0 {
		t.Error("the handler did not get the observer's context")
	}

	e.enqueue(inbox.Message{Source: "s", MessageID: "f-1", Topic: "fails", Payload: []byte("{}")})
	run(1)
	if o := rec.checkOne(t, 1, core.InboxQueued, core.InboxRetry); o.msg.Attempt != 1 || !errors.Is(o.result.Err, failure) {
		t.Errorf("retry: %+v", o)
	}
	e.clock.Advance(time.Hour)
	run(1)
	if o := rec.checkOne(t, 2, core.InboxQueued, core.InboxDead); o.msg.Attempt != 2 || !errors.Is(o.result.Err, failure) {
		t.Errorf("dead: %+v", o)
	}

	e.enqueue(inbox.Message{Source: "s", MessageID: "u-1", Topic: "nobody", Payload: []byte("{}")})
	run(1)
	if o := rec.checkOne(t, 3, core.InboxQueued, core.InboxUnhandled); !errors.Is(o.result.Err, inbox.ErrNoHandler) {
		t.Errorf("unhandled: %+v", o)
	}
}

// A message enqueued with a DueAt reports that as its enqueue time: the
// delay asked for is not a wait in the inbox.
func TestObserverQueuedDueAt(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w"})
	mustHandle(t, d, "ok", func(context.Context, inbox.Record) error { return nil })
	due := e.clock.Now().Add(time.Hour)
	e.enqueue(inbox.Message{Source: "s", MessageID: "later", Topic: "ok", Payload: []byte("{}"), DueAt: due})
	e.clock.Advance(time.Hour + time.Minute)
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1", n, err)
	}
	if o := rec.checkOne(t, 0, core.InboxQueued, core.InboxProcessed); !o.msg.Enqueued.Equal(due) {
		t.Errorf("Enqueued = %v, want the message's DueAt %v", o.msg.Enqueued, due)
	}
}

// A claim that finds the attempts used up (the last one ended without an
// outcome: its process died) runs nothing and is no first handling, also
// with MaxAttempts 1: observers that measure the wait of first handlings
// (Attempt <= 1) must not count the message's wait a second time.
func TestObserverAttemptsExhaustedIsNoFirstHandling(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	e.enqueue(inbox.Message{Source: "s", MessageID: "poison", Topic: "ok", Payload: []byte("{}")})
	if recs := e.claim("doomed", time.Minute, 1); len(recs) != 1 { // a node claims it, then dies
		t.Fatalf("claimed %d, want 1", len(recs))
	}
	e.clock.Advance(2 * time.Minute)
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", MaxAttempts: 1})
	mustHandle(t, d, "ok", func(context.Context, inbox.Record) error { return nil })
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1", n, err)
	}
	o := rec.checkOne(t, 0, core.InboxQueued, core.InboxDead)
	if !errors.Is(o.result.Err, inbox.ErrAttemptsExhausted) || o.msg.Attempt <= 1 || !o.result.NotRun {
		t.Errorf("exhausted claim observed as %+v, want Attempt > 1, ErrAttemptsExhausted and NotRun", o)
	}
}

// A dispatcher's own Observer replaces the inbox's.
func TestObserverDispatcherOverride(t *testing.T) {
	fromInbox, own := &recorder{}, &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: fromInbox})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Observer: own})
	mustHandle(t, d, "ok", func(context.Context, inbox.Record) error { return nil })
	e.enqueue(inbox.Message{Source: "s", MessageID: "m", Topic: "ok", Payload: []byte("{}")})
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	own.checkOne(t, 0, core.InboxQueued, core.InboxProcessed)
	if n := len(fromInbox.all()); n != 0 {
		t.Errorf("the inbox's observer saw %d handlings", n)
	}
}

// A handler that calls runtime.Goexit still ends its observation, once,
// as a retry carrying ErrHandlerGoexit.
func TestObserverHandlerGoexit(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Workers: 1, PollInterval: time.Millisecond})
	mustHandle(t, d, "exit", func(context.Context, inbox.Record) error { runtime.Goexit(); return nil })
	e.start(d)
	e.enqueue(inbox.Message{Source: "s", MessageID: "exits", Topic: "exit", Payload: []byte("{}")})
	waitFor(t, "the Goexit handling observed", func() bool {
		all := rec.all()
		return len(all) > 0 && all[0].ended > 0
	})
	if o := rec.checkOne(t, 0, core.InboxQueued, core.InboxRetry); !errors.Is(o.result.Err, inbox.ErrHandlerGoexit) {
		t.Errorf("Goexit: %+v", o)
	}
}

// A business function that panics or calls runtime.Goexit still ends its
// observation (failed), once, and the panic reaches the caller as it
// was: the observation was never ended, a span left open.
func TestObserverTransactionalPanicEnds(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	var got any
	func() {
		defer func() { got = recover() }()
		_, _ = e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "p"}, func(context.Context, *sqlx.Tx) error { panic("boom") })
	}()
	if got != "boom" {
		t.Fatalf("recovered %v, want the business function's panic", got)
	}
	// The function ran (and took its time) before it panicked.
	if o := rec.checkOne(t, 0, core.InboxTransactional, core.InboxFailed); o.result.Err == nil || o.result.NotRun || o.result.Took <= 0 {
		t.Errorf("a panicked processing ended with %+v, want an error, the function run and its time", o.result)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "g"}, func(context.Context, *sqlx.Tx) error { runtime.Goexit(); return nil })
	}()
	<-done
	if o := rec.checkOne(t, 1, core.InboxTransactional, core.InboxFailed); o.result.NotRun || o.result.Took <= 0 {
		t.Errorf("a processing whose function called Goexit ended with %+v, want the function run and its time", o.result)
	}
	// Nothing was recorded: the message is processed afterwards.
	if ok, err := e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "p"}, func(context.Context, *sqlx.Tx) error { return nil }); !ok || err != nil {
		t.Fatalf("Process after the panic = %v, %v", ok, err)
	}
}

// A Process whose transaction meets lock contention runs it again: that
// round is reported as a retry, not as a failure the caller never saw
// (dashboards showed failures for calls that all succeeded).
func TestObserverProcessContentionIsARetry(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	runs := 0
	ok, err := e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "busy"}, func(context.Context, *sqlx.Tx) error {
		if runs++; runs == 1 {
			return sqlite3.Error{Code: sqlite3.ErrBusy} // lock contention: Process runs it again
		}
		return nil
	})
	if !ok || err != nil || runs != 2 {
		t.Fatalf("Process = %v, %v after %d runs; want processed after 2", ok, err, runs)
	}
	if o := rec.checkOne(t, 0, core.InboxTransactional, core.InboxRetry); !errors.Is(o.result.Err, inbox.ErrContention) {
		t.Errorf("first round: %+v, want a retry with ErrContention", o.result)
	}
	rec.checkOne(t, 1, core.InboxTransactional, core.InboxProcessed)
}
