package otel_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	obsotel "github.com/outbox-go/outbox/otel"
)

// An event carrying a traceparent a propagator cannot read (set by hand,
// copied from a broken request, written by an old publisher) gets the
// producer span's instead, as an empty one does: its delivery joins the
// publisher's trace rather than starting a trace of its own, and the
// producer span has no link (there was no context to link to).
func TestUnreadableTraceparentGetsTheProducers(t *testing.T) {
	for name, bad := range map[string]string{
		"garbage":      "not-a-traceparent",
		"all-zero ids": "00-00000000000000000000000000000000-0000000000000000-01",
		"version ff":   "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, obsotel.Config{})
			ob := openOutbox(t, h, filepath.Join(t.TempDir(), "ob.db"), outbox.Config{})
			delivered := make(chan trace.SpanContext, 1)
			ob.RegisterFunc("Audit", func(ctx context.Context, _ core.Envelope) error {
				delivered <- trace.SpanContextFromContext(ctx)
				return nil
			})
			if err := ob.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, root := h.tp.Tracer("test").Start(context.Background(), "POST /audit", trace.WithSpanKind(trace.SpanKindServer))
			env, err := outbox.NewEvent("Audit").Header("traceparent", bad).Header("tracestate", "old=1").PayloadJSONString(`{}`).Build()
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err }); err != nil {
				t.Fatal(err)
			}
			root.End()
			var got trace.SpanContext
			select {
			case got = <-delivered:
			case <-time.After(30 * time.Second):
				t.Fatal("the event was not delivered")
			}
			testsupport.WaitFor(t, 30*time.Second, "the event DONE", func() bool {
				rec, err := ob.Get(context.Background(), env.ID())
				return err == nil && rec.Status == core.StatusDone
			})
			if err := ob.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			send := h.span(t, "send Audit")
			if got.TraceID() != root.SpanContext().TraceID() {
				t.Errorf("the delivery ran in trace %v, want the publisher's %v", got.TraceID(), root.SpanContext().TraceID())
			}
			proc := h.span(t, "process Audit")
			if proc.Parent().SpanID() != send.SpanContext().SpanID() {
				t.Errorf("consumer span's parent %v, want the producer span %v", proc.Parent().SpanID(), send.SpanContext().SpanID())
			}
			if len(send.Links()) != 0 {
				t.Errorf("producer span links %v, want none", send.Links())
			}
			rec, err := ob.Get(context.Background(), env.ID())
			if err != nil {
				t.Fatal(err)
			}
			stored, err := rec.Envelope()
			if err != nil {
				t.Fatal(err)
			}
			if p, _ := stored.Header("traceparent"); p == bad {
				t.Errorf("the stored headers kept the unreadable traceparent: %v", stored.Headers())
			}
			if s, _ := stored.Header("tracestate"); s == "old=1" {
				t.Errorf("the stored headers kept the unreadable traceparent's tracestate: %v", stored.Headers())
			}
		})
	}
}
