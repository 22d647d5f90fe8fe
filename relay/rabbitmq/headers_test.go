package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/rabbitmq"
	"github.com/outbox-go/outbox/retry"
)

// The relay's metadata headers win: an event header (or a Propagator's)
// named like one of them, in any case, is dropped, so a consumer always
// reads the event's own id, type and fields (an event id copied into the
// headers of two events would make a consumer deduplicating on
// Outbox-Event-Id drop the second). Content-Type is the relay's for a
// JSON payload only: a bytes event's own Content-Type travels.
func TestRelayMetadataHeadersWin(t *testing.T) {
	ex, got := consumedExchange(t)
	r := newRelay(t, rabbitmq.Config{Exchange: ex, Propagator: relaytest.SpoofInjector{}})
	envs, wants := relaytest.SpoofedEvents(t, "agg-1")
	want := map[string]map[string]string{}
	for i, env := range envs {
		if err := r.OnEvent(context.Background(), env); err != nil {
			t.Fatalf("OnEvent: %v", err)
		}
		want[env.ID()] = wants[i]
	}
	testsupport.WaitFor(t, 30*time.Second, "both messages in the queue", func() bool { return got.count() >= 2 }, got.wake)
	for _, d := range got.all() {
		w, ok := want[d.MessageId]
		if !ok {
			t.Errorf("unexpected message %q", d.MessageId)
			continue
		}
		headers := make(map[string]string, len(d.Headers))
		for k, v := range d.Headers {
			headers[k] = fmt.Sprint(v)
		}
		relaytest.CheckMetadataHeaders(t, d.MessageId, headers, w)
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
	ex, got := consumedExchange(t)
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
