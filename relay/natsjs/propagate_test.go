package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/natsjs"
)

type deliveryKey struct{}

// markingObserver gives the listeners a context naming the event, as a
// tracing Observer gives them its delivery span.
type markingObserver struct{ core.NopObserver }

func (markingObserver) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	return context.WithValue(ctx, deliveryKey{}, "delivery-of-"+d.Event.ID()), func(core.DeliveryResult) {}
}

// fakeInjector writes what the listener's ctx carries as the trace
// context, and a JetStream control header that must not get through.
type fakeInjector struct{}

func (fakeInjector) InjectHeaders(ctx context.Context, set func(key, value string)) {
	v, _ := ctx.Value(deliveryKey{}).(string)
	set("traceparent", v)
	set("Nats-Rollup", "all")
}

// With a Propagator, the message carries the trace context of the
// listener's ctx, replacing the event's own, and no control header.
func TestRelayPropagatorWritesTheDeliveryContext(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}", Propagator: fakeInjector{}})
	if err != nil {
		t.Fatal(err)
	}
	ob := relaytest.Outbox(t, outbox.Config{Observer: markingObserver{}}, r)
	// The event's own in another case, and the same case: both replaced.
	env, err := core.NewEvent("Traced").Header("Traceparent", traceparent).Header("traceparent", traceparent).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Publish(t, ob, env)
	testsupport.WaitFor(t, 30*time.Second, "the event DONE", func() bool { return relaytest.Counts(t, ob)[core.StatusDone] == 1 })

	msgs := streamMsgs(t, st)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if got, want := m.Header.Values("traceparent"), "delivery-of-"+env.ID(); len(got) != 1 || got[0] != want {
		t.Errorf("traceparent = %q, want only %q (the delivery's, not the event's)", got, want)
	}
	if got := m.Header.Values("Traceparent"); len(got) != 0 {
		t.Errorf("the event's Traceparent = %q went out too, want it replaced", got)
	}
	if got := m.Header.Get("Nats-Rollup"); got != "" {
		t.Errorf("the propagator's Nats-Rollup header reached JetStream: %q", got)
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != env.ID() {
		t.Errorf("Nats-Msg-Id = %q, want %q", got, env.ID())
	}
}
