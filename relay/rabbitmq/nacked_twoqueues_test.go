package rabbitmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// A message routed to two queues, one of them full with overflow
// reject-publish-dlx: the broker nacks it, so the event is put off,
// uncharged, with no outage (one ERROR); the queue with room took a copy
// and takes another at each probe of the routing key (one per
// ProbeInterval: the retries in between publish nothing), and the
// dead-letter exchange one per nack, as ErrNacked says; once room is made
// the event is confirmed and the incident ends with one INFO. Every retry
// published a copy before.
func TestRelayNackedByOneOfTwoQueues(t *testing.T) {
	ch := admin(t)
	x := newExchange(t, ch)
	dlx := newExchange(t, ch)
	dlq := newQueue(t, ch, dlx, "#")
	full := newQueueWith(t, ch, x, "k", amqp.Table{"x-max-length": int32(1),
		"x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": dlx})
	roomy := newQueue(t, ch, x, "k")
	r, logs, _, clock := probingRelay(t, rabbitmq.Config{Exchange: x, RoutingKey: "k"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.OnEvent(ctx, typedEvent(t, "T")); err != nil {
		t.Fatalf("while the queue has room: %v", err)
	}
	refused := typedEvent(t, "T")
	for i := range 4 {
		if i == 2 {
			clock.Advance(time.Hour) // the routing key's next probe
		}
		err := r.OnEvent(ctx, refused)
		var unavailable *core.UnavailableError
		if !errors.As(err, &unavailable) || !errors.Is(err, rabbitmq.ErrNacked) {
			t.Fatalf("try %d: %v, want it put off (core.Unavailable wrapping ErrNacked)", i, err)
		}
	}
	count := func(q string) int {
		t.Helper()
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return info.Messages
	}
	// The broker sends the nack once the full queue refused the message,
	// without waiting for the other queue and the dead-letter exchange:
	// their counts follow.
	var inRoomy, inFull, inDLQ int
	deadline := time.Now().Add(10 * time.Second)
	for {
		inRoomy, inFull, inDLQ = count(roomy), count(full), count(dlq)
		if (inRoomy == 3 && inFull == 1 && inDLQ == 2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if inRoomy != 3 || inFull != 1 || inDLQ != 2 {
		t.Errorf("queue with room %d, full queue %d, dead-letter queue %d: want 3 (the first message and a copy per probe), 1 and 2 (a copy per nack)",
			inRoomy, inFull, inDLQ)
	}
	if n := logs.Count("level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
	}
	if _, err := ch.QueuePurge(full, false); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if err := r.OnEvent(ctx, refused); err != nil {
		t.Fatalf("after the purge: %v", err)
	}
	if n := logs.Count("level=INFO", "full destination takes messages again", "put_offs=4"); n != 1 {
		t.Errorf("want one INFO line counting the 4 put off:\n%s", logs)
	}
	if n := logs.Count("recovered"); n != 0 {
		t.Errorf("an outage:\n%s", logs)
	}
	if got := count(full); got != 1 {
		t.Errorf("full queue holds %d after the purge and the retry, want 1", got)
	}
}
