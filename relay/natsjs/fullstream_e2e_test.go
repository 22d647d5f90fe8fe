package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
	"github.com/outbox-go/outbox/retry"
)

// Through a real outbox: ordered events of several aggregates (a subject
// each) fill a stream with DiscardNew; the ones it refuses wait,
// uncharged, none DEAD, until a consumer makes room; then every event
// reaches the stream, each aggregate's in order, DONE with no attempt
// charged, every ERROR has its INFO and the metrics end with nothing
// full.
func TestRelayFullStreamThroughOutbox(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, func(c *jetstream.StreamConfig) {
		c.MaxMsgs = 5
		c.Discard = jetstream.DiscardNew
		c.Retention = jetstream.WorkQueuePolicy
	})
	logger, logs := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	r, err := natsjs.New(js, natsjs.Config{Subject: "{aggregate_id}", Logger: logger, Metrics: m,
		Breaker: relay.BreakerConfig{ProbeInterval: 100 * time.Millisecond, RetryAfter: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	l := &countingListener{l: r}
	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{
		Workers: 4, MaxAttempts: 2, Retry: retry.Exponential{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}, l)

	const aggs, each = 4, 5
	var ids []string
	for i := range each {
		for a := range aggs {
			agg := fmt.Sprintf("%s.agg-%d", prefix, a)
			env, err := core.NewEvent("T").AggregateID(agg).OrderKey(agg).PayloadBytes([]byte(strconv.Itoa(i))).Build()
			if err != nil {
				t.Fatal(err)
			}
			relaytest.Publish(t, ob, env)
			ids = append(ids, env.ID())
		}
	}
	testsupport.WaitFor(t, 30*time.Second, "the stream full and an event refused", func() bool {
		return streamCount(t, st) == 5 && logs.Count("level=ERROR", "stream full") == 1
	})
	// Let the refused events be retried a few times.
	testsupport.WaitFor(t, 30*time.Second, "events put off again and again", func() bool { return l.putOff.Load() >= 3*aggs })
	for _, id := range ids {
		rec, err := ob.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Attempts != 0 || rec.Status == core.StatusDead {
			t.Errorf("event %s: %v with %d attempts while the stream is full, want no attempt charged", id, rec.Status, rec.Attempts)
		}
	}

	// A consumer makes room.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	order := map[string][]int{}
	for len(seen) < len(ids) {
		batch, err := cons.Fetch(5, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			id := msg.Headers().Get(relay.HeaderEventID)
			if seen[id] == 0 {
				n, _ := strconv.Atoi(string(msg.Data()))
				order[msg.Subject()] = append(order[msg.Subject()], n)
			}
			seen[id]++
			if err := msg.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d events consumed: %v", len(seen), len(ids), relaytest.Counts(t, ob))
		}
	}
	for subj, ns := range order {
		for i, n := range ns {
			if n != i {
				t.Errorf("subject %s: events %v, want in order", subj, ns)
				break
			}
		}
	}
	testsupport.WaitFor(t, 30*time.Second, "every event DONE", func() bool { return relaytest.Counts(t, ob)[core.StatusDone] == len(ids) })
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("event %s never reached the stream", id)
		}
		rec, err := ob.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("event %s: %v with %d attempts, want DONE with 0", id, rec.Status, rec.Attempts)
		}
	}
	testsupport.WaitFor(t, 30*time.Second, "the incident ended", func() bool {
		return logs.Count("level=INFO", "full destination takes messages again") == logs.Count("level=ERROR")
	})
	if n := logs.Count("recovered"); n != 0 {
		t.Errorf("%d recovered lines, want none:\n%s", n, logs)
	}
	all := m.All()
	if len(all) == 0 || all[len(all)-1] != "full=0" || strings.Contains(strings.Join(all, " "), "up=false") {
		t.Errorf("metrics %q, want the broker up throughout and nothing full at the end", all)
	}
}

// countingListener counts the events its listener put off.
type countingListener struct {
	l      core.Listener
	putOff atomic.Int64
}

func (c *countingListener) OnEvent(ctx context.Context, env core.Envelope) error {
	err := c.l.OnEvent(ctx, env)
	var ue *core.UnavailableError
	if errors.As(err, &ue) {
		c.putOff.Add(1)
	}
	return err
}
