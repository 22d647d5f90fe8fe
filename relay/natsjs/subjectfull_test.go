package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A subject the stream takes no more messages on (MaxMsgsPerSubject with
// DiscardNewPerSubject, JetStream's 503 "maximum messages per subject
// exceeded") puts its event off, uncharged, and opens no outage: the
// events of the other subjects are published, and no ERROR is logged. It
// opened the breaker, so every event of every subject was put off until a
// probe, and each retry of the event began a new outage.
func TestRelaySubjectFullPutsOffItsEventAlone(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, func(c *jetstream.StreamConfig) {
		c.MaxMsgsPerSubject = 1
		c.Discard = jetstream.DiscardNew
		c.DiscardNewPerSubject = true
	})
	logger, logs := testsupport.NewLogger()
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{aggregate_id}", Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	event := func(agg string) core.Envelope { return aggregateEvent(t, agg) }

	if err := r.OnEvent(ctx, event("full")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		err := r.OnEvent(ctx, event("full"))
		var unavailable *core.UnavailableError
		if !errors.As(err, &unavailable) || errors.Is(err, natsjs.ErrRejected) {
			t.Fatalf("event %d to the full subject: %v, want it put off (core.Unavailable)", i, err)
		}
		if err := r.OnEvent(ctx, event(fmt.Sprintf("other-%d", i))); err != nil {
			t.Fatalf("event %d to another subject: %v", i, err)
		}
	}
	if n := streamCount(t, st); n != 4 {
		t.Errorf("%d messages in the stream, want 4", n)
	}
	if n := logs.Count("level=ERROR"); n != 0 {
		t.Errorf("%d ERROR lines, want none:\n%s", n, logs)
	}
}
