package otel_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	obsotel "github.com/outbox-go/outbox/otel"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/retry"
)

// openOutbox opens an outbox over the SQLite file path with h's Observer
// as its Observer and Metrics; it is closed in Cleanup (closing it
// earlier is fine).
func openOutbox(t *testing.T, h *harness, path string, cfg outbox.Config) *outbox.Outbox {
	t.Helper()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cfg.Observer, cfg.Metrics = h.obs, h.obs
	cfg.Logger = slog.New(slog.DiscardHandler)
	ob, err := outbox.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	return ob
}

// request publishes one event of typ inside a transaction, under a root
// span standing for an HTTP handler's; it returns the event's id and the
// root span's context.
func request(t *testing.T, h *harness, ob *outbox.Outbox, typ string) (string, trace.SpanContext) {
	t.Helper()
	ctx, root := h.tp.Tracer("test").Start(context.Background(), "POST /orders", trace.WithSpanKind(trace.SpanKindServer))
	defer root.End()
	env, err := outbox.JSONEvent(typ, `{"order":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err }); err != nil {
		t.Fatal(err)
	}
	return env.ID(), root.SpanContext()
}

// spansNamed returns the ended spans named name, in end order.
func spansNamed(h *harness, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// One trace runs from the request through the publish, a failed hot
// attempt and the retry that succeeds, down to the listener's own span;
// the metrics count both outcomes, the lag and the DONE write.
func TestEndToEndHotDeliveryAndRetry(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	ob := openOutbox(t, h, filepath.Join(t.TempDir(), "ob.db"), outbox.Config{
		Dispatcher: dispatcher.Config{Retry: retry.PolicyFunc(func(int) time.Duration { return time.Millisecond })},
	})
	var (
		mu    sync.Mutex
		calls int
	)
	ob.RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		_, work := h.tp.Tracer("app").Start(ctx, "charge card")
		defer work.End()
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return errors.New("card service timed out")
		}
		return nil
	})
	if err := ob.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id, root := request(t, h, ob, "OrderPlaced")
	testsupport.WaitFor(t, 30*time.Second, "the event DONE", func() bool {
		rec, err := ob.Get(context.Background(), id)
		return err == nil && rec.Status == core.StatusDone
	})
	if err := ob.Close(context.Background()); err != nil { // flushes every span and DONE write
		t.Fatal(err)
	}

	send := h.span(t, "send OrderPlaced")
	if send.Parent().SpanID() != root.SpanID() {
		t.Errorf("producer span's parent %v, want the request %v", send.Parent().SpanID(), root.SpanID())
	}
	procs := spansNamed(h, "process OrderPlaced")
	if len(procs) != 2 {
		t.Fatalf("%d consumer spans, want 2 (the failed attempt and the retry)", len(procs))
	}
	for i, want := range []map[string]string{
		{"outbox.attempt": "1", "outbox.path": "hot", "outbox.outcome": "retry", "outbox.store": "", "messaging.message.id": id},
		{"outbox.attempt": "2", "outbox.path": "retry", "outbox.outcome": "done", "outbox.store": "", "messaging.message.id": id},
	} {
		p := procs[i]
		wantAttrs(t, "attempt "+want["outbox.attempt"], p.Attributes(), want)
		if p.SpanContext().TraceID() != root.TraceID() || p.Parent().SpanID() != send.SpanContext().SpanID() {
			t.Errorf("attempt %d: trace %v parent %v, want trace %v parent the producer %v", i+1,
				p.SpanContext().TraceID(), p.Parent().SpanID(), root.TraceID(), send.SpanContext().SpanID())
		}
	}
	if procs[0].Status().Code != codes.Error || !strings.Contains(procs[0].Status().Description, "card service timed out") {
		t.Errorf("failed attempt's status %v, want Error with the listener's error", procs[0].Status())
	}
	if procs[1].Status().Code == codes.Error {
		t.Errorf("successful retry's status %v", procs[1].Status())
	}
	works := spansNamed(h, "charge card")
	if len(works) != 2 {
		t.Fatalf("%d listener spans, want 2", len(works))
	}
	for i, w := range works {
		if w.Parent().SpanID() != procs[i].SpanContext().SpanID() {
			t.Errorf("listener span %d: parent %v, want its attempt's consumer span %v", i, w.Parent().SpanID(), procs[i].SpanContext().SpanID())
		}
	}

	ms := h.collect(t)
	for _, outcome := range []string{"retry", "done"} {
		metricPoint(t, ms, obsotel.MetricDeliveries, map[string]string{"messaging.destination.name": "OrderPlaced", "outbox.outcome": outcome})
		metricPoint(t, ms, obsotel.MetricProcess, map[string]string{"messaging.destination.name": "OrderPlaced", "outbox.outcome": outcome})
	}
	metricPoint(t, ms, obsotel.MetricLag, map[string]string{"messaging.destination.name": "OrderPlaced", "outbox.path": "hot"})
	if p := metricPoint(t, ms, obsotel.MetricDoneBatch, map[string]string{"outbox.store": ""}); p.sum != 1 {
		t.Errorf("%s sum = %v, want 1 event written DONE", obsotel.MetricDoneBatch, p.sum)
	}
	metricPoint(t, ms, obsotel.MetricSent, map[string]string{"messaging.destination.name": "OrderPlaced"})
	metricPoint(t, ms, obsotel.MetricEnqueued, map[string]string{"outbox.queue": "hot"})
}

// An event published by a process that closed before delivering it is
// delivered by the poller of the next one, and its consumer span still
// joins the publisher's trace.
func TestEndToEndPollerAfterRestart(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	path := filepath.Join(t.TempDir(), "ob.db")

	first := openOutbox(t, h, path, outbox.Config{DisablePoller: true})
	// No listener and not started: the event stays pending.
	id, root := request(t, h, first, "OrderPlaced")
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	send := h.span(t, "send OrderPlaced")

	second := openOutbox(t, h, path, outbox.Config{Poller: poller.Config{Interval: 20 * time.Millisecond, SkipRecent: time.Millisecond}})
	ran := make(chan trace.SpanContext, 1)
	second.RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		ran <- trace.SpanContextFromContext(ctx)
		return nil
	})
	if err := second.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var inListener trace.SpanContext
	select {
	case inListener = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the poller did not deliver the event")
	}
	testsupport.WaitFor(t, 30*time.Second, "the event DONE", func() bool {
		rec, err := second.Get(context.Background(), id)
		return err == nil && rec.Status == core.StatusDone
	})
	if err := second.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	proc := h.span(t, "process OrderPlaced")
	wantAttrs(t, "cold attempt", proc.Attributes(), map[string]string{"outbox.path": "cold", "outbox.attempt": "1", "outbox.outcome": "done"})
	if proc.SpanContext().TraceID() != root.TraceID() || proc.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Errorf("cold attempt: trace %v parent %v, want trace %v parent the producer %v",
			proc.SpanContext().TraceID(), proc.Parent().SpanID(), root.TraceID(), send.SpanContext().SpanID())
	}
	if !inListener.Equal(proc.SpanContext()) {
		t.Errorf("the listener ran under %v, want the consumer span %v", inListener.SpanID(), proc.SpanContext().SpanID())
	}
	ms := h.collect(t)
	metricPoint(t, ms, obsotel.MetricLag, map[string]string{"outbox.path": "cold"})
	metricPoint(t, ms, obsotel.MetricClaimTime, map[string]string{"outbox.store": ""})
	metricPoint(t, ms, obsotel.MetricEnqueued, map[string]string{"outbox.queue": "cold"})
}
