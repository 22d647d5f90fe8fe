package relaytest

import (
	"context"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay"
)

// Traceparent is the trace context SpoofInjector writes.
const Traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// SpoofInjector is a Propagator that writes Traceparent and, besides,
// headers of the relay's metadata names, which must not travel.
type SpoofInjector struct{}

// InjectHeaders implements the relays' Propagator.
func (SpoofInjector) InjectHeaders(_ context.Context, set func(key, value string)) {
	set("traceparent", Traceparent)
	set(relay.HeaderEventID, "from-the-propagator")
	set("outbox-occurred-at", "from-the-propagator")
}

// SpoofedEvents returns two events whose own headers copy the relay's
// metadata names in several cases, a JSON one of aggregate id aggID and a
// bytes one with its own Content-Type, and for each the headers it must
// arrive with through a relay given SpoofInjector: the relay's metadata
// wins, Content-Type is the relay's for the JSON payload only.
func SpoofedEvents(t testing.TB, aggID string) ([]core.Envelope, []map[string]string) {
	t.Helper()
	const copied = "copied-from-upstream"
	jsonEvent, err := core.NewEvent("Over").AggregateType("T").AggregateID(aggID).
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
	return []core.Envelope{jsonEvent, bytesEvent}, []map[string]string{
		{relay.HeaderEventID: jsonEvent.ID(), relay.HeaderEventType: "Over", relay.HeaderAggregateType: "T",
			relay.HeaderAggregateID: aggID, relay.HeaderContentType: "application/json", "x-own": "kept", "traceparent": Traceparent},
		{relay.HeaderEventID: bytesEvent.ID(), relay.HeaderEventType: "Over",
			relay.HeaderContentType: "application/protobuf", "traceparent": Traceparent},
	}
}

// CheckMetadataHeaders checks the headers a message arrived with (named
// msg in errors) against want, from SpoofedEvents: every wanted value,
// the relay's occurred-at and no tenant (the events have none), and no
// header but the relay's of a metadata name in another case.
func CheckMetadataHeaders(t testing.TB, msg string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("message %s: %s = %q, want %q", msg, k, got[k], v)
		}
	}
	if got[relay.HeaderOccurredAt] == "from-the-propagator" {
		t.Errorf("message %s: the Propagator's %s replaced the relay's", msg, relay.HeaderOccurredAt)
	}
	if v, ok := got[relay.HeaderTenant]; ok {
		t.Errorf("message %s: %s = %q for an event without a tenant", msg, relay.HeaderTenant, v)
	}
	metadata := []string{relay.HeaderEventID, relay.HeaderEventType, relay.HeaderAggregateType, relay.HeaderAggregateID,
		relay.HeaderTenant, relay.HeaderOccurredAt, relay.HeaderOrderKey, relay.HeaderContentType}
	for k, v := range got {
		for _, m := range metadata {
			if strings.EqualFold(k, m) && k != m {
				t.Errorf("message %s: header %q = %q travels beside the metadata header %s", msg, k, v, m)
			}
		}
	}
}
