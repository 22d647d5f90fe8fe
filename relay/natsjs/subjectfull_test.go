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

// A subject the stream takes no more messages on (MaxMsgsPerSubject with
// DiscardNewPerSubject, JetStream's 503 "maximum messages per subject
// exceeded") puts its event off, uncharged, and opens no outage: the
// events of the other subjects are published. Its events wait for ever
// unless room is made, so the stream's incident logs one ERROR naming it
// (it logged nothing above DEBUG), and the metrics count it full. It
// opened the breaker, before, so every event of every subject was put off
// until a probe, and each retry of the event began a new outage.
func TestRelaySubjectFullPutsOffItsEventAlone(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, func(c *jetstream.StreamConfig) {
		c.MaxMsgsPerSubject = 1
		c.Discard = jetstream.DiscardNew
		c.DiscardNewPerSubject = true
	})
	r, logs, m, _ := probingRelay(t, js, prefix+".{aggregate_id}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := r.OnEvent(ctx, aggregateEvent(t, "full")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		err := r.OnEvent(ctx, aggregateEvent(t, "full"))
		var unavailable *core.UnavailableError
		if !errors.As(err, &unavailable) || errors.Is(err, natsjs.ErrRejected) {
			t.Fatalf("event %d to the full subject: %v, want it put off (core.Unavailable)", i, err)
		}
		if err := r.OnEvent(ctx, aggregateEvent(t, fmt.Sprintf("other-%d", i))); err != nil {
			t.Fatalf("event %d to another subject: %v", i, err)
		}
	}
	if n := streamCount(t, st); n != 4 {
		t.Errorf("%d messages in the stream, want 4", n)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, named := logs.Count("level=ERROR"), logs.Count("level=ERROR", "destination="+info.Config.Name, "per subject"); n != 1 || named != 1 {
		t.Errorf("want one ERROR line naming the stream and its per-subject limit:\n%s", logs)
	}
	if n := logs.Count("unreachable"); n != 0 {
		t.Errorf("an outage:\n%s", logs)
	}
	if got, want := m.All(), []string{"up=true", "full=0", "full=1"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q", got, want)
	}
}
