package rabbitmq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// spoofInjector is a Propagator that writes the traceparent of the
// delivery and, besides, headers of metadata names.
type spoofInjector struct{}

func (spoofInjector) InjectHeaders(_ context.Context, set func(key, value string)) {
	set("traceparent", traceparent)
	set(relay.HeaderEventID, "from-the-propagator")
	set("outbox-occurred-at", "from-the-propagator")
}

// The relay's metadata headers win: an event header (or a Propagator's)
// named like one of them, in any case, is dropped, so a consumer always
// reads the event's own id, type and fields (an event id copied into the
// headers of two events would make a consumer deduplicating on
// Outbox-Event-Id drop the second). Content-Type is the relay's for a
// JSON payload only: a bytes event's own Content-Type travels.
func TestRelayMetadataHeadersWin(t *testing.T) {
	ch := admin(t)
	ex := newExchange(t, ch)
	q := newQueue(t, ch, ex, "#")
	got := consume(t, q)
	r := newRelay(t, rabbitmq.Config{Exchange: ex, Propagator: spoofInjector{}})

	const copied = "copied-from-upstream"
	jsonEvent, err := core.NewEvent("Over").AggregateType("T").AggregateID("agg-1").
		Header(relay.HeaderEventID, copied).Header("outbox-event-type", "Other").Header("OUTBOX-TENANT", "spoof").
		Header(relay.HeaderAggregateID, "the event's").Header("content-type", "text/plain").Header("x-own", "kept").
		PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	bytesEvent, err := core.NewEvent("Over").Header(relay.HeaderEventID, copied).
		Header(relay.HeaderContentType, "application/protobuf").PayloadBytes([]byte{1}).Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []core.Envelope{jsonEvent, bytesEvent} {
		if err := r.OnEvent(context.Background(), env); err != nil {
			t.Fatalf("OnEvent: %v", err)
		}
	}
	testsupport.WaitFor(t, 30*time.Second, "both messages in the queue", func() bool { return got.count() >= 2 }, got.wake)

	metadata := []string{relay.HeaderEventID, relay.HeaderEventType, relay.HeaderAggregateType, relay.HeaderAggregateID,
		relay.HeaderTenant, relay.HeaderOccurredAt, relay.HeaderOrderKey, relay.HeaderContentType}
	want := map[string]map[string]string{
		jsonEvent.ID(): {relay.HeaderEventID: jsonEvent.ID(), relay.HeaderEventType: "Over", relay.HeaderAggregateType: "T",
			relay.HeaderAggregateID: "agg-1", relay.HeaderContentType: "application/json", "x-own": "kept", "traceparent": traceparent},
		bytesEvent.ID(): {relay.HeaderEventID: bytesEvent.ID(), relay.HeaderEventType: "Over",
			relay.HeaderContentType: "application/protobuf", "traceparent": traceparent},
	}
	for _, d := range got.all() {
		w, ok := want[d.MessageId]
		if !ok {
			t.Errorf("unexpected message %q", d.MessageId)
			continue
		}
		checkMetadataHeaders(t, d, w, metadata)
	}
}

// checkMetadataHeaders checks d's headers against want and that no
// header but the relay's carries a metadata name in another case.
func checkMetadataHeaders(t *testing.T, d amqp.Delivery, want map[string]string, metadata []string) {
	t.Helper()
	for k, v := range want {
		if d.Headers[k] != v {
			t.Errorf("message %s: %s = %v, want %q", d.MessageId, k, d.Headers[k], v)
		}
	}
	if v := d.Headers[relay.HeaderOccurredAt]; v == "from-the-propagator" {
		t.Errorf("message %s: the Propagator's %s replaced the relay's", d.MessageId, relay.HeaderOccurredAt)
	}
	if v, ok := d.Headers[relay.HeaderTenant]; ok {
		t.Errorf("message %s: %s = %v for an event without a tenant", d.MessageId, relay.HeaderTenant, v)
	}
	for k, v := range d.Headers {
		for _, m := range metadata {
			if strings.EqualFold(k, m) && k != m {
				t.Errorf("message %s: header %q = %v travels beside the metadata header %s", d.MessageId, k, v, m)
			}
		}
	}
}
