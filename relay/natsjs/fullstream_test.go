package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A stream full with DiscardNew (MaxMsgs: JetStream's 503 "maximum
// messages exceeded"; MaxBytes answers "maximum bytes exceeded", below) puts its events
// off, uncharged, and opens no outage: another stream's events are
// published meanwhile. The incident logs one ERROR naming the stream, and
// one INFO once its refused subjects were taken again. It opened the
// breaker, so every stream's events were put off until a probe, and each
// probe that reached another stream ended the outage, which the next
// event of the full stream began again: an ERROR and a "recovered" line
// per probe.
func TestRelayFullStreamPutsOffItsEventsAlone(t *testing.T) {
	_, js := connect(t)
	full, fullPrefix := newStream(t, js, func(c *jetstream.StreamConfig) {
		c.MaxMsgs = 5
		c.Discard = jetstream.DiscardNew
	})
	other, otherPrefix := newStream(t, js, nil)
	r, logs, m, clock := probingRelay(t, js, "{aggregate_id}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	put := fillUntilPutOff(ctx, t, r, fullPrefix)
	if put < 3 || put == 1000 {
		t.Fatalf("the stream took %d events before it refused one, want it full after 3 to 999 (room for the 3 it refuses)", put)
	}
	refused := []string{fmt.Sprintf("%s.fill-%d", fullPrefix, put)}
	for i := range 3 {
		s := fmt.Sprintf("%s.more-%d", fullPrefix, i%2)
		err := r.OnEvent(ctx, aggregateEvent(t, s))
		var unavailable *core.UnavailableError
		if !errors.As(err, &unavailable) || errors.Is(err, natsjs.ErrRejected) {
			t.Fatalf("event %d to the full stream: %v, want it put off (core.Unavailable)", i, err)
		}
		if i < 2 {
			refused = append(refused, s)
		}
		if err := r.OnEvent(ctx, aggregateEvent(t, fmt.Sprintf("%s.other-%d", otherPrefix, i))); err != nil {
			t.Fatalf("event %d to another stream: %v", i, err)
		}
	}
	if n := streamCount(t, other); n != 3 {
		t.Errorf("%d messages in the other stream, want 3", n)
	}
	info, err := full.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errs := logs.Lines("level=ERROR")
	if len(errs) != 1 || logs.Count("level=ERROR", "stream full", "destination="+info.Config.Name) != 1 {
		t.Fatalf("ERROR lines %q, want one naming the full stream %s:\n%s", errs, info.Config.Name, logs)
	}
	if n := logs.Count("recovered"); n != 0 {
		t.Errorf("%d recovered lines, want none (no outage):\n%s", n, logs)
	}

	// Room is made: the refused events go in; the incident ends
	// once every refused subject was taken.
	if err := full.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // each refused subject's next probe
	for i, s := range refused {
		if err := r.OnEvent(ctx, aggregateEvent(t, s)); err != nil {
			t.Fatalf("refused event %s after the purge: %v", s, err)
		}
		ended := logs.Count("level=INFO", "full destination takes messages again", "destination="+info.Config.Name)
		if want := map[bool]int{false: 0, true: 1}[i == len(refused)-1]; ended != want {
			t.Fatalf("after %d of the %d refused subjects went in: %d lines that the stream takes messages again, want %d:\n%s",
				i+1, len(refused), ended, want, logs)
		}
	}
	if logs.Count("put_offs=4") != 1 {
		t.Errorf("the INFO line does not count the 4 events put off:\n%s", logs)
	}
	if n := logs.Count("level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
	}
	if got, want := m.All(), []string{"up=true", "full=0", "full=1", "full=0"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q (the broker up throughout, one destination full and no more)", got, want)
	}
}

// Both limits of a stream that discards new messages are told apart from
// the per-subject one and from other 503s. (A MaxBytes stream is not
// filled in a test against the server: nats-server 2.9 acks some messages
// past MaxBytes with DiscardNew before it refuses one, so where it refuses
// varies.)
func TestIsStreamFull(t *testing.T) {
	for _, tc := range []struct {
		code int
		desc string
		want bool
	}{
		{503, "maximum messages exceeded", true},
		{503, "maximum bytes exceeded", true},
		{503, "maximum messages per subject exceeded", false},
		{503, "JetStream system temporarily unavailable", false},
		{500, "maximum messages exceeded", false},
		{400, "maximum bytes exceeded", false},
	} {
		if got := natsjs.IsStreamFull(&jetstream.APIError{Code: tc.code, ErrorCode: 10077, Description: tc.desc}); got != tc.want {
			t.Errorf("IsStreamFull(%d %q) = %v, want %v", tc.code, tc.desc, got, tc.want)
		}
	}
}

// fillUntilPutOff relays events to prefix.fill-0, prefix.fill-1, … until
// one is put off (core.Unavailable: its stream, or the server's storage,
// is full) and returns how many went in; 1000 when none was put off. An
// event refused, or failing otherwise, fails the test.
func fillUntilPutOff(ctx context.Context, t *testing.T, r *natsjs.Relay, prefix string) int {
	t.Helper()
	for put := range 1000 {
		err := r.OnEvent(ctx, aggregateEvent(t, fmt.Sprintf("%s.fill-%d", prefix, put)))
		if err == nil {
			continue
		}
		var unavailable *core.UnavailableError
		if !errors.As(err, &unavailable) || errors.Is(err, natsjs.ErrRejected) {
			t.Fatalf("event %d to %s: %v, want it put off (core.Unavailable)", put, prefix, err)
		}
		return put
	}
	return 1000
}
