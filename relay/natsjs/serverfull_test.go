package natsjs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The server's own JetStream storage of one kind full (max_memory_store
// reached: 503 "insufficient resources") puts off the events of the
// streams it refuses, uncharged, as a full stream does, and opens no
// outage: a file stream on the same server takes its events meanwhile,
// and the log has one ERROR, no "recovered" line. (It opened the breaker:
// the file stream's events were put off too, 0 of 5 delivered in 3 s,
// and each probe that reached the file stream ended the outage, which the
// memory stream's next event began again.)
func TestRelayServerStorageFullPutsOffItsEventsAlone(t *testing.T) {
	s := startPrivateServerWith(t, "jetstream { max_memory_store: 16KB }")
	js := s.connect(s.url())
	_, memPrefix := newStream(t, js, func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage })
	file, filePrefix := newStream(t, js, nil)
	r, logs, _, _ := probingRelay(t, js, "{aggregate_id}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	put := fillUntilPutOff(ctx, t, r, memPrefix)
	if put == 1000 {
		t.Fatal("the memory stream took 1000 events: the server's memory storage never filled")
	}
	for i := range 5 {
		if err := r.OnEvent(ctx, aggregateEvent(t, fmt.Sprintf("%s.other-%d", filePrefix, i))); err != nil {
			t.Fatalf("event %d to the file stream while the memory storage is full: %v", i, err)
		}
	}
	if n := streamCount(t, file); n != 5 {
		t.Errorf("%d messages in the file stream, want 5", n)
	}
	if n := logs.Count("level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
	}
	if n := logs.Count("recovered"); n != 0 {
		t.Errorf("%d recovered lines, want none (no outage):\n%s", n, logs)
	}
}
