package outbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/retry"
)

type ctxKey string

// recorder is an Observer that stamps a header at Publish, marks the
// listeners' context, and records every call.
type recorder struct {
	core.NopObserver
	mu         sync.Mutex
	published  map[string]error // event id → the error done got
	deliveries []core.Delivery
	results    []core.DeliveryResult
	doneWrites int
	claims     int
	headers    map[string]string // what Publish returns
	changed    chan struct{}
}

func newRecorder() *recorder {
	return &recorder{published: map[string]error{}, headers: map[string]string{"traceparent": "00-trace-span-01"},
		changed: make(chan struct{}, 1)}
}

func (r *recorder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) Publish(ctx context.Context, env core.Envelope) (map[string]string, func(error)) {
	if ctx.Value(ctxKey("request")) == nil {
		panic("Publish did not get the publisher's context")
	}
	return r.headers, func(err error) {
		r.mu.Lock()
		r.published[env.ID()] = err
		r.mu.Unlock()
	}
}

func (r *recorder) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
	return context.WithValue(ctx, ctxKey("span"), d.Attempt), func(res core.DeliveryResult) {
		r.mu.Lock()
		r.results = append(r.results, res)
		r.mu.Unlock()
		r.signal()
	}
}

func (r *recorder) DoneWritten(store string, n int, _ time.Duration, err error) {
	r.mu.Lock()
	if err == nil {
		r.doneWrites += n
	}
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) Claimed(string, int, time.Duration, error) {
	r.mu.Lock()
	r.claims++
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) snapshot() ([]core.Delivery, []core.DeliveryResult, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Delivery(nil), r.deliveries...), append([]core.DeliveryResult(nil), r.results...), r.doneWrites
}

// The Observer sees a publish with the publisher's context and adds its
// headers to the event; each delivery attempt runs the listeners with the
// context it returns and reports its outcome (a failure, then the retry
// that succeeds), with path, attempt and commit time; DONE writes are
// reported.
func TestObserverSeesPublishAndEveryAttempt(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "ob.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := newRecorder()
	ob, err := outbox.New(context.Background(), db, outbox.Config{Observer: rec,
		Dispatcher: dispatcher.Config{Retry: retry.PolicyFunc(func(int) time.Duration { return time.Millisecond })}})
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	seen := make(chan core.Envelope, 2)
	ob.RegisterFunc("Traced", func(ctx context.Context, env core.Envelope) error {
		calls++
		if ctx.Value(ctxKey("span")) != calls {
			t.Errorf("attempt %d: the listener's context lacks the Observer's value", calls)
		}
		seen <- env
		if calls == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	})
	if err := ob.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer ob.Close(context.Background())

	before := time.Now()
	ctx := context.WithValue(context.Background(), ctxKey("request"), "r-1")
	env, err := outbox.JSONEvent("Traced", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err }); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var got core.Envelope
		select {
		case got = <-seen:
		case <-time.After(10 * time.Second):
			t.Fatal("the listener was not called")
		}
		if v, _ := got.Header("traceparent"); v != "00-trace-span-01" {
			t.Errorf("the listener's event lacks the Observer's header: %v", got.Headers())
		}
	}
	testsupport.WaitFor(t, 10*time.Second, "the DONE write observed", func() bool { _, _, n := rec.snapshot(); return n == 1 }, rec.changed)
	ds, rs, _ := rec.snapshot()
	if len(ds) != 2 || len(rs) != 2 {
		t.Fatalf("%d deliveries and %d results observed, want 2 and 2", len(ds), len(rs))
	}
	if ds[0].Path != core.PathHot || ds[0].Attempt != 1 || ds[1].Path != core.PathRetry || ds[1].Attempt != 2 {
		t.Errorf("attempts observed as %v/%d then %v/%d, want hot/1 then retry/2", ds[0].Path, ds[0].Attempt, ds[1].Path, ds[1].Attempt)
	}
	for i, d := range ds {
		if d.Event.ID() != env.ID() || d.Store != "" || d.Committed.Before(before) || d.Committed.After(time.Now()) {
			t.Errorf("delivery %d: %+v", i, d)
		}
	}
	if rs[0].Outcome != core.OutcomeRetry || rs[0].Err == nil || rs[1].Outcome != core.OutcomeDone || rs[1].Err != nil {
		t.Errorf("outcomes %v (%v) then %v (%v), want retry then done", rs[0].Outcome, rs[0].Err, rs[1].Outcome, rs[1].Err)
	}
	rec.mu.Lock()
	perr, ok := rec.published[env.ID()]
	rec.mu.Unlock()
	if !ok || perr != nil {
		t.Errorf("publish done(%v) called: %v, want done(nil)", perr, ok)
	}
	stored, err := ob.Get(context.Background(), env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored.HeadersJSON, `"traceparent":"00-trace-span-01"`) {
		t.Errorf("stored headers %s lack the Observer's header", stored.HeadersJSON)
	}
}

// An event the poller delivers is observed on the cold path, with the
// row's insert time as its commit time, and the claim is reported.
func TestObserverSeesThePollerPath(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "ob.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := newRecorder()
	ob, err := outbox.New(context.Background(), db, outbox.Config{Observer: rec,
		Poller: poller.Config{Interval: 20 * time.Millisecond, SkipRecent: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ob.RegisterFunc("Cold", func(context.Context, core.Envelope) error { return nil })
	if err := ob.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer ob.Close(context.Background())
	env, err := outbox.JSONEvent("Cold", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin() // a plain transaction: no hot path, the poller delivers it
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), ctxKey("request"), "r-2")
	if _, err := ob.PublishTx(ctx, tx, env); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The poller reports a claim once it has handed its rows over: the
	// delivery may be observed first.
	claimed := func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.claims > 0 }
	testsupport.WaitFor(t, 10*time.Second, "the cold delivery and its claim observed", func() bool {
		_, rs, _ := rec.snapshot()
		return len(rs) == 1 && claimed()
	}, rec.changed)
	ds, rs, _ := rec.snapshot()
	if ds[0].Path != core.PathCold || ds[0].Committed.IsZero() || rs[0].Outcome != core.OutcomeDone {
		t.Errorf("cold delivery observed as %+v, %+v", ds[0], rs[0])
	}
}

// badHeadersOutbox returns an outbox on a new SQLite database whose
// Observer returns a header with an empty key.
func badHeadersOutbox(t *testing.T) (*outbox.Outbox, *recorder) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "ob.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rec := newRecorder()
	rec.headers = map[string]string{"": "empty key"}
	ob, err := outbox.New(context.Background(), db, outbox.Config{Observer: rec, DisablePoller: true})
	if err != nil {
		t.Fatal(err)
	}
	return ob, rec
}

// Headers the Observer returns that are invalid fail Publish with
// ErrInvalidHeader, write nothing, and reach the Observer's done.
func TestObserverInvalidHeadersRefused(t *testing.T) {
	ob, rec := badHeadersOutbox(t)
	env, err := outbox.JSONEvent("Bad", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), ctxKey("request"), "r-3")
	err = ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err })
	if !errors.Is(err, core.ErrInvalidHeader) {
		t.Fatalf("Publish with the Observer's invalid header = %v, want ErrInvalidHeader", err)
	}
	if _, err := ob.Get(context.Background(), env.ID()); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("the event was stored: %v", err)
	}
	rec.mu.Lock()
	perr := rec.published[env.ID()]
	rec.mu.Unlock()
	if !errors.Is(perr, core.ErrInvalidHeader) {
		t.Errorf("the Observer's done got %v, want the error Publish returned", perr)
	}
}

// PublishAll reports every event of a batch to the Observer, also when
// the Observer's headers for one of them are refused: the events after
// it were never reported (and their done never called).
func TestObserverInvalidHeadersRefusedInABatch(t *testing.T) {
	ob, rec := badHeadersOutbox(t)
	var envs []core.Envelope
	for range 4 {
		env, err := outbox.JSONEvent("Bad", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, env)
	}
	ctx := context.WithValue(context.Background(), ctxKey("request"), "r-4")
	err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.PublishAll(ctx, envs...); return err })
	var be *core.BatchError
	if !errors.As(err, &be) || be.Index != 0 || !errors.Is(err, core.ErrInvalidHeader) {
		t.Fatalf("PublishAll with the Observer's invalid header = %v, want a *core.BatchError of index 0 wrapping ErrInvalidHeader", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, env := range envs {
		if perr, ok := rec.published[env.ID()]; !ok || !errors.Is(perr, core.ErrInvalidHeader) {
			t.Errorf("event %d: reported %v, done got %v; want it reported with PublishAll's error", i, ok, perr)
		}
	}
}
