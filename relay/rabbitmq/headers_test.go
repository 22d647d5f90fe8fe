package rabbitmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
	"github.com/outbox-go/outbox/retry"
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

// RabbitMQ routes a message by its "CC" and "BCC" headers too (sender-
// selected distribution: exactly those names, each an array of routing
// keys) and closes the channel of one where they are strings (406
// PRECONDITION_FAILED). An event header of either name fails the event at
// once with ErrInvalidMessage, a normal failure (DEAD after MaxAttempts),
// before anything is sent: an event field never adds destinations, and
// no channel (nor the publishes of other events on it) is lost. Other
// cases of the names are ordinary headers.
func TestRelaySenderSelectedHeadersRefused(t *testing.T) {
	ch := admin(t)
	ex := newExchange(t, ch)
	q := newQueue(t, ch, ex, "#")
	got := consume(t, q)
	r := newRelay(t, rabbitmq.Config{Exchange: ex})
	event := func(k string) core.Envelope {
		env, err := core.NewEvent("Mail").Header(k, "boss@example.com").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	for _, k := range []string{"CC", "BCC"} {
		err := r.OnEvent(context.Background(), event(k))
		if !errors.Is(err, rabbitmq.ErrInvalidMessage) || errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), `"`+k+`"`) {
			t.Errorf("an event with a %s header: %v, want ErrInvalidMessage naming it", k, err)
		}
	}
	ok := []core.Envelope{event("cc"), event("Bcc")}
	for _, env := range ok {
		if err := r.OnEvent(context.Background(), env); err != nil {
			t.Errorf("an event with a %v header: %v", env.Headers(), err)
		}
	}
	testsupport.WaitFor(t, 30*time.Second, "the events with other cases of the names", func() bool { return got.count() >= len(ok) }, got.wake)
	for _, d := range got.all() {
		if d.Headers["cc"] != "boss@example.com" && d.Headers["Bcc"] != "boss@example.com" {
			t.Errorf("message %s: headers %v", d.MessageId, d.Headers)
		}
	}

	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{Workers: 2, MaxAttempts: 2,
		Retry: retry.Exponential{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}, r)
	cc := event("CC")
	relaytest.Publish(t, ob, cc)
	testsupport.WaitFor(t, 30*time.Second, "the event with a CC header DEAD", func() bool { return relaytest.Counts(t, ob)[core.StatusDead] == 1 })
	rec, err := ob.Get(context.Background(), cc.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 2 || !strings.Contains(rec.LastError, rabbitmq.ErrInvalidMessage.Error()) {
		t.Errorf("record: %d attempts, last error %q", rec.Attempts, rec.LastError)
	}
}
