package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/retry"
)

func (e *env) dispatcher(cfg inbox.DispatcherConfig) *inbox.Dispatcher {
	e.t.Helper()
	d, err := e.in.NewDispatcher(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// start runs d until the test ends.
func (e *env) start(d *inbox.Dispatcher) {
	e.t.Helper()
	if err := d.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			e.t.Errorf("stop: %v", err)
		}
	})
}

func mustHandle(t *testing.T, d *inbox.Dispatcher, topic string, fn func(ctx context.Context, msg inbox.Record) error) {
	t.Helper()
	if err := d.HandleFunc(topic, fn); err != nil {
		t.Fatal(err)
	}
}

// Each message goes to its topic's handler, matched
// case-sensitively, with the full record and a bounded context; Enqueue
// wakes the dispatcher (the poll interval here is an hour).
func testDispatcherRoutes(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "node-1", PollInterval: time.Hour})
	type call struct {
		handler  string
		rec      inbox.Record
		deadline bool
	}
	calls := make(chan call, 10)
	for _, topic := range []string{"Order.Created", "order.created"} {
		mustHandle(t, d, topic, func(ctx context.Context, rec inbox.Record) error {
			_, ok := ctx.Deadline()
			calls <- call{handler: topic, rec: rec, deadline: ok}
			return nil
		})
	}
	e.start(d)
	e.enqueue(inbox.Message{Source: "shop", MessageID: "upper", Topic: "Order.Created", Payload: []byte("U")})
	e.enqueue(inbox.Message{Source: "shop", MessageID: "lower", Topic: "order.created", Payload: []byte("L")})
	got := map[string]call{}
	for range 2 {
		select {
		case c := <-calls:
			got[c.rec.MessageID] = c
		case <-e.ctx.Done():
			t.Fatal("handlers not called")
		}
	}
	for id, want := range map[string]string{"upper": "Order.Created", "lower": "order.created"} {
		c := got[id]
		mustEqual(t, id+" handler", c.handler, want)
		mustEqual(t, id+" topic", c.rec.Topic, want)
		mustEqual(t, id+" source", c.rec.Source, "shop")
		mustEqual(t, id+" payload", string(c.rec.Payload), strings.ToUpper(id[:1]))
		mustEqual(t, id+" attempt", c.rec.Attempt, 1)
		mustEqual(t, id+" owner", c.rec.LockedBy, "node-1")
		mustEqual(t, id+" first seen", c.rec.FirstSeenAt, e.clock.Now())
		mustEqual(t, id+" ctx deadline", c.deadline, true)
		waitFor(t, id+" Done", func() bool { return e.status("shop", id) == inbox.StatusDone })
	}
}

// A failing handler is retried with
// backoff and the message is Dead after MaxAttempts; failures are logged at
// ERROR with the message id, never with the payload.
func testDispatcherRetriesThenDead(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", MaxAttempts: 3})
	var seen []int
	mustHandle(t, d, "t", func(_ context.Context, rec inbox.Record) error {
		seen = append(seen, rec.Attempt)
		return errors.New("downstream unavailable")
	})
	e.enqueue(inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte("SECRET-PAYLOAD")})
	run := func(want int) {
		t.Helper()
		n, err := d.RunOnce(e.ctx)
		if err != nil || n != want {
			t.Fatalf("RunOnce = %d, %v; want %d", n, err, want)
		}
	}
	now := e.clock.Now()
	run(1)
	rec := e.get("s", "m")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "attempt", rec.Attempt, 1)
	mustEqual(t, "error", rec.LastError, "downstream unavailable")
	mustEqual(t, "backoff", rec.NextAttemptAt, now.Add(2*time.Second))
	mustEqual(t, "lease released", rec.LockedBy, "")
	run(0)
	e.clock.Advance(2 * time.Second)
	run(1)
	mustEqual(t, "attempt", e.get("s", "m").Attempt, 2)
	e.clock.Advance(4 * time.Second)
	run(1)
	rec = e.get("s", "m")
	mustEqual(t, "status", rec.Status, inbox.StatusDead)
	mustEqual(t, "attempt", rec.Attempt, 3)
	e.clock.Advance(time.Hour)
	run(0)
	mustEqual(t, "attempts seen by the handler", fmt.Sprint(seen), "[1 2 3]")
	mustEqual(t, "retry logs", len(e.logs.Lines("level=WARN", "will retry", "message_id=m", "downstream unavailable")), 2)
	mustEqual(t, "dead log", len(e.logs.Lines("level=ERROR", "Dead", "message_id=m")), 1)
	if strings.Contains(e.logs.String(), "SECRET-PAYLOAD") {
		t.Fatal("the payload was logged")
	}
}

// fieldErr is a handler's error type whose Error reads a field.
type fieldErr struct{ msg *string }

func (e *fieldErr) Error() string { return *e.msg }

// No handler → warning, abandoned for a retry; a panic is a
// failed attempt, and so is an error that panics when logged. Handler
// and configuration validation.
func testDispatcherNoHandlerAndPanic(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w"})
	mustHandle(t, d, "boom", func(context.Context, inbox.Record) error { panic("kaboom") })
	// A typed nil error whose methods read a field: it panics when logged.
	mustHandle(t, d, "typed-nil", func(context.Context, inbox.Record) error { var fe *fieldErr; return fe })
	e.enqueue(inbox.Message{Source: "s", MessageID: "unrouted", Topic: "nobody"})
	e.enqueue(inbox.Message{Source: "s", MessageID: "panics", Topic: "boom"})
	e.enqueue(inbox.Message{Source: "s", MessageID: "typed-nil", Topic: "typed-nil"})
	if n, err := d.RunOnce(e.ctx); err != nil || n != 3 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	rec0 := e.get("s", "typed-nil")
	mustEqual(t, "typed nil: status", rec0.Status, inbox.StatusProcessing)
	mustEqual(t, "typed nil: attempt", rec0.Attempt, 1)
	mustEqual(t, "typed nil: error", strings.Contains(rec0.LastError, "panics when inspected"), true)
	rec := e.get("s", "unrouted")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "attempt", rec.Attempt, 0) // no handler ran: not charged
	mustEqual(t, "error", strings.Contains(rec.LastError, "no handler for topic"), true)
	mustEqual(t, "warning", len(e.logs.Lines("level=WARN", "no handler", "topic=nobody")), 1)
	rec = e.get("s", "panics")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "attempt", rec.Attempt, 1)
	mustEqual(t, "error", strings.Contains(rec.LastError, "handler panicked: kaboom"), true)
	// The panic's stack is in an ERROR line (it was at DEBUG only, out of
	// an operator's sight at the usual levels), the retry a WARN, as the
	// outbox's listeners' are.
	mustEqual(t, "panic log with the stack", len(e.logs.Lines("level=ERROR", "handler panicked", "message_id=panics", "stack=", "dispatcher_test.go")), 1)
	mustEqual(t, "retry log", len(e.logs.Lines("level=WARN", "will retry", "message_id=panics", "attempts=1")), 1)

	if err := d.HandleFunc("", func(context.Context, inbox.Record) error { return nil }); !errors.Is(err, inbox.ErrEmptyTopic) {
		t.Fatalf("empty topic: %v", err)
	}
	if err := d.HandleFunc("boom", func(context.Context, inbox.Record) error { return nil }); !errors.Is(err, inbox.ErrDuplicateHandler) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := d.Handle("x", nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("nil handler: %v", err)
	}
	for _, cfg := range []inbox.DispatcherConfig{
		{Lease: time.Second, HandlerTimeout: time.Second},
		// The sum overflowing must not let any lease pass.
		{Lease: time.Minute, HandlerTimeout: math.MaxInt64 - time.Second, StatusTimeout: 2 * time.Second},
		{Owner: strings.Repeat("o", inbox.MaxOwnerLen+1)},
		{Workers: -1},
		{Workers: math.MaxInt}, // a panic making the slots channel, before
		{BatchSize: inbox.MaxBatchSize + 1},
		{CleanupBatch: math.MaxInt},
		{MaxAttempts: -1},
		{Retry: retry.PolicyFunc(nil)}, // passed, then killed the process at the first retry
	} {
		if _, err := e.in.NewDispatcher(cfg); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("config %+v: %v", cfg, err)
		}
	}
}

// A handler that calls runtime.Goexit (t.FailNow, require.*) fails its
// attempt like a panic: the failure is recorded and logged with the message
// id, and the worker slot is given back, so later messages are handled.
func testDispatcherHandlerGoexit(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Workers: 1, PollInterval: time.Millisecond})
	mustHandle(t, d, "exit", func(context.Context, inbox.Record) error { runtime.Goexit(); return nil })
	mustHandle(t, d, "ok", func(context.Context, inbox.Record) error { return nil })
	e.start(d)
	e.enqueue(inbox.Message{Source: "s", MessageID: "exits", Topic: "exit"})
	waitFor(t, "the Goexit attempt to be recorded", func() bool { return e.get("s", "exits").LastError != "" })
	rec := e.get("s", "exits")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "attempt", rec.Attempt, 1)
	mustEqual(t, "error", rec.LastError, inbox.ErrHandlerGoexit.Error())
	mustEqual(t, "lease released", rec.LockedBy, "")
	mustEqual(t, "retry log", len(e.logs.Lines("level=WARN", "will retry", "message_id=exits", "Goexit")), 1)
	mustEqual(t, "error log with the stack", len(e.logs.Lines("level=ERROR", "runtime.Goexit", "message_id=exits", "stack=", "dispatcher_test.go")), 1)
	e.enqueue(inbox.Message{Source: "s", MessageID: "next", Topic: "ok"})
	waitFor(t, "the next message Done", func() bool { return e.status("s", "next") == inbox.StatusDone })
}

// Different messages are handled at once, up to Workers.
func testDispatcherConcurrency(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Workers: 3})
	entered, release := make(chan string, 3), make(chan struct{})
	mustHandle(t, d, "t", func(_ context.Context, rec inbox.Record) error {
		entered <- rec.MessageID
		<-release
		return nil
	})
	e.start(d)
	for i := range 3 {
		e.enqueue(inbox.Message{Source: "s", MessageID: fmt.Sprint(i), Topic: "t"})
	}
	for range 3 { // all three are inside a handler at the same time
		select {
		case <-entered:
		case <-e.ctx.Done():
			t.Fatal("handlers did not run concurrently")
		}
	}
	close(release)
	for i := range 3 {
		waitFor(t, "Done", func() bool { return e.status("s", fmt.Sprint(i)) == inbox.StatusDone })
	}
}

// Two dispatchers on one table never handle a message twice,
// let alone at the same time.
func testDispatcherNeverSameMessageTwice(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	const total = 60
	var (
		calls    sync.Map // message id → *atomic.Int32
		inflight sync.Map // message id → *atomic.Int32
		overlap  atomic.Bool
	)
	counter := func(m *sync.Map, id string) *atomic.Int32 {
		v, _ := m.LoadOrStore(id, new(atomic.Int32))
		return v.(*atomic.Int32)
	}
	handler := func(_ context.Context, rec inbox.Record) error {
		f := counter(&inflight, rec.MessageID)
		if f.Add(1) > 1 {
			overlap.Store(true)
		}
		runtime.Gosched()
		counter(&calls, rec.MessageID).Add(1)
		f.Add(-1)
		return nil
	}
	for _, owner := range []string{"node-a", "node-b"} {
		d := e.dispatcher(inbox.DispatcherConfig{Owner: owner, Workers: 4, BatchSize: 3, PollInterval: time.Millisecond})
		mustHandle(t, d, "t", handler)
		e.start(d)
	}
	for i := range total {
		e.enqueue(inbox.Message{Source: "s", MessageID: fmt.Sprintf("%02d", i), Topic: "t"})
	}
	for i := range total {
		id := fmt.Sprintf("%02d", i)
		waitFor(t, id+" Done", func() bool { return e.status("s", id) == inbox.StatusDone })
		mustEqual(t, id+" calls", counter(&calls, id).Load(), int32(1))
	}
	mustEqual(t, "overlap", overlap.Load(), false)
}

// A dispatcher releases the leases a crashed
// node left behind and deletes Done messages past retention.
func testDispatcherReapsAndCleansUp(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	if err := e.in.MarkProcessed(e.ctx, "s", "old"); err != nil {
		t.Fatal(err)
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "orphan", Topic: "t"})
	e.claim("crashed-node", time.Second, 10)
	e.clock.Advance(31 * 24 * time.Hour)
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Retention: 30 * 24 * time.Hour})
	mustHandle(t, d, "t", func(context.Context, inbox.Record) error { return nil })
	e.start(d)
	waitFor(t, "orphan Done", func() bool { return e.status("s", "orphan") == inbox.StatusDone })
	waitFor(t, "old deleted", func() bool { return e.status("s", "old") == inbox.Status(-1) })
	mustEqual(t, "reap log", len(e.logs.Lines("level=INFO", "released expired leases", "messages=1")), 1)
	// The cleanup runs beside the claims and logs once its DELETE has
	// committed: the row can be gone before the line is written.
	cleanupLog := func() int {
		return len(e.logs.Lines("level=INFO", "deleted Done messages past retention", "messages=1"))
	}
	waitFor(t, "the cleanup logged", func() bool { return cleanupLog() > 0 })
	mustEqual(t, "cleanup log", cleanupLog(), 1)
}

// Start/Close: a graceful Close waits for the running handler's outcome; a
// Close whose ctx ends cancels handlers, records nothing and hands back the
// interrupted message's lease; Close is final.
func testDispatcherStop(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	entered, release := make(chan string, 4), make(chan struct{})
	newDispatcher := func() *inbox.Dispatcher {
		d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", PollInterval: time.Hour})
		mustHandle(t, d, "slow", func(_ context.Context, rec inbox.Record) error {
			entered <- rec.MessageID
			<-release
			return nil
		})
		mustHandle(t, d, "stuck", func(ctx context.Context, rec inbox.Record) error {
			entered <- rec.MessageID
			<-ctx.Done()
			return ctx.Err()
		})
		return d
	}
	d := newDispatcher()
	if err := d.Close(e.ctx); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
	if err := d.Start(e.ctx); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}
	d = newDispatcher()
	if err := d.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(e.ctx); err == nil {
		t.Fatal("second Start succeeded")
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "slow", Topic: "slow"})
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- d.Close(context.Background()) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("graceful Close: %v", err)
	}
	mustEqual(t, "status when Close returned", e.status("s", "slow"), inbox.StatusDone)
	if err := d.Start(e.ctx); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}

	// A new dispatcher (same owner); a handler that holds on until its ctx ends.
	d = newDispatcher()
	if err := d.Start(e.ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "stuck", Topic: "stuck"})
	<-entered
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hard Close: %v", err)
	}
	if err := d.Close(e.ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	rec := e.get("s", "stuck")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "attempt not charged", rec.Attempt, 0)
	mustEqual(t, "lease released", rec.LockedBy, "")
	mustEqual(t, "log", len(e.logs.Lines("interrupted by shutdown", "lease is released", "message_id=stuck")), 1)

	// Another dispatcher (a restarted process) takes it over at once,
	// without waiting for the lease (30 s) to expire.
	d2 := e.dispatcher(inbox.DispatcherConfig{Owner: "w2", PollInterval: time.Hour})
	mustHandle(t, d2, "stuck", func(context.Context, inbox.Record) error { return nil })
	n, err := d2.RunOnce(e.ctx)
	if err != nil || n != 1 {
		t.Fatalf("RunOnce of the next owner = %d, %v; want 1, nil", n, err)
	}
	mustEqual(t, "status after the next owner", e.status("s", "stuck"), inbox.StatusDone)
}
