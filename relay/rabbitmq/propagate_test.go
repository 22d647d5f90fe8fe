package rabbitmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

type deliveryKey struct{}

// markingObserver gives the listeners a context naming the event, as a
// tracing Observer gives them its delivery span.
type markingObserver struct{ core.NopObserver }

func (markingObserver) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	return context.WithValue(ctx, deliveryKey{}, "delivery-of-"+d.Event.ID()), func(core.DeliveryResult) {}
}

// fakeInjector writes what the listener's ctx carries as the trace
// context; with long set, also a header name AMQP cannot carry.
type fakeInjector struct{ long bool }

func (f fakeInjector) InjectHeaders(ctx context.Context, set func(key, value string)) {
	v, _ := ctx.Value(deliveryKey{}).(string)
	set("traceparent", v)
	if f.long {
		set(strings.Repeat("k", 256), "x")
	}
}

// With a Propagator, the message carries the trace context of the
// listener's ctx, replacing the event's own.
func TestRelayPropagatorWritesTheDeliveryContext(t *testing.T) {
	ch := admin(t)
	ex := newExchange(t, ch)
	q := newQueue(t, ch, ex, "traced.#")
	got := consume(t, q)
	r := newRelay(t, rabbitmq.Config{Exchange: ex, RoutingKey: "traced.{type}", Propagator: fakeInjector{}})
	ob := relaytest.Outbox(t, outbox.Config{Observer: markingObserver{}}, r)
	// The event's own, in another case (Go's http.Header spelling): it
	// went out beside the propagator's.
	env, err := core.NewEvent("Traced").Header("Traceparent", traceparent).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Publish(t, ob, env)
	testsupport.WaitFor(t, 30*time.Second, "the message in the queue and DONE", func() bool {
		return got.count() >= 1 && relaytest.Counts(t, ob)[core.StatusDone] == 1
	}, got.wake)
	msgs := got.all()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	if v, want := msgs[0].Headers["traceparent"], "delivery-of-"+env.ID(); v != want {
		t.Errorf("traceparent = %v, want %q (the delivery's, not the event's)", v, want)
	}
	if v, ok := msgs[0].Headers["Traceparent"]; ok {
		t.Errorf("the event's Traceparent = %v went out too, want it replaced", v)
	}
}

// A header name the propagator writes that AMQP cannot carry fails the
// attempt with ErrInvalidMessage, like an event header would.
func TestRelayPropagatorHeaderChecked(t *testing.T) {
	r := newRelay(t, rabbitmq.Config{Exchange: "unused-" + uniq(), Propagator: fakeInjector{long: true}})
	env, err := core.NewEvent("Traced").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), env); !errors.Is(err, rabbitmq.ErrInvalidMessage) {
		t.Errorf("OnEvent = %v, want ErrInvalidMessage", err)
	}
}
