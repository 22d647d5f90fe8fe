package rabbitmq_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// A queue full with overflow reject-publish makes the broker nack the
// messages routed to it: that is no refusal of the message, and no
// outage. The event is put off, uncharged (core.Unavailable wrapping
// ErrNacked), the events of other routing keys are delivered meanwhile,
// one ERROR names the exchange and routing key, and one INFO follows once
// the nacked ones were confirmed. A nack was a normal failure: the events
// of a queue whose consumer was down long enough went DEAD.
func TestRelayNackedEventIsPutOffUncharged(t *testing.T) {
	ch := admin(t)
	x := newExchange(t, ch)
	full := newQueueWith(t, ch, x, "full", amqp.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	other := newQueue(t, ch, x, "other")
	r, logs, m, clock := probingRelay(t, rabbitmq.Config{Exchange: x, RoutingKey: "{type}"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for i := range 2 {
		if err := r.OnEvent(ctx, typedEvent(t, "full")); err != nil {
			t.Fatalf("event %d, while the queue has room: %v", i, err)
		}
	}
	for i := range 3 {
		err := r.OnEvent(ctx, typedEvent(t, "full"))
		var unavailable *core.UnavailableError
		if !errors.As(err, &unavailable) || !errors.Is(err, rabbitmq.ErrNacked) {
			t.Fatalf("event %d to the full queue: %v, want it put off (core.Unavailable wrapping ErrNacked)", i, err)
		}
		if err := r.OnEvent(ctx, typedEvent(t, "other")); err != nil {
			t.Fatalf("event %d to another routing key: %v", i, err)
		}
	}
	if q, err := ch.QueueDeclarePassive(other, true, false, false, false, nil); err != nil || q.Messages != 3 {
		t.Errorf("the other queue holds %d messages (%v), want 3", q.Messages, err)
	}
	if n, named := logs.Count("level=ERROR"), logs.Count("level=ERROR", "nacked", `routing key \"full\"`); n != 1 || named != 1 {
		t.Fatalf("want one ERROR line naming the routing key:\n%s", logs)
	}
	if n := logs.Count("recovered"); n != 0 {
		t.Errorf("%d recovered lines, want none (no outage):\n%s", n, logs)
	}

	if _, err := ch.QueuePurge(full, false); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // the routing key's next probe
	if err := r.OnEvent(ctx, typedEvent(t, "full")); err != nil {
		t.Fatalf("after the purge: %v", err)
	}
	if n := logs.Count("level=INFO", "full destination takes messages again", "put_offs=3"); n != 1 {
		t.Errorf("want one INFO line counting the 3 events put off:\n%s", logs)
	}
	if got, want := m.All(), []string{"up=true", "full=0", "full=1", "full=0"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q (the broker up throughout, one destination full and no more)", got, want)
	}
}
