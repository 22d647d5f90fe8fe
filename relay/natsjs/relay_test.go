package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
	"github.com/outbox-go/outbox/retry"
)

const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// Every committed event reaches the stream once, on its subject, with its
// id as Nats-Msg-Id, the metadata and its own headers, and its payload;
// every row ends DONE without a failed attempt.
func TestRelayEndToEnd(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{aggregate_type}.{type}"})
	if err != nil {
		t.Fatal(err)
	}
	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{Workers: 16}}, r)

	const n = 60
	want := map[string]core.Envelope{}
	for i := range n {
		b := core.NewEvent(fmt.Sprintf("Order%d", i%3)).AggregateType("Order").AggregateID(fmt.Sprint(i)).
			Header("traceparent", traceparent).PayloadJSONString(fmt.Sprintf(`{"n":%d}`, i))
		if i%2 == 0 {
			b = b.TenantID("acme")
		}
		env, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		want[env.ID()] = env
		relaytest.Publish(t, ob, env)
	}
	testsupport.WaitFor(t, 30*time.Second, "every event DONE", func() bool { return relaytest.Counts(t, ob)[core.StatusDone] == n })

	msgs := streamMsgs(t, st)
	if len(msgs) != n {
		t.Fatalf("%d messages in the stream, want %d", len(msgs), n)
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		id := m.Header.Get(jetstream.MsgIDHeader)
		env, ok := want[id]
		if !ok || seen[id] {
			t.Fatalf("unexpected or repeated Nats-Msg-Id %q", id)
		}
		seen[id] = true
		if wantSubj := prefix + ".Order." + env.Type(); m.Subject != wantSubj {
			t.Errorf("%s: subject %q, want %q", id, m.Subject, wantSubj)
		}
		if string(m.Data) != env.PayloadString() {
			t.Errorf("%s: payload %q, want %q", id, m.Data, env.PayloadString())
		}
		hdr := map[string]string{
			"traceparent": traceparent, relay.HeaderEventID: id, relay.HeaderEventType: env.Type(),
			relay.HeaderAggregateType: "Order", relay.HeaderAggregateID: env.AggregateID(),
			relay.HeaderContentType: "application/json", relay.HeaderTenant: env.TenantID(),
		}
		for k, v := range hdr {
			if got := m.Header.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", id, k, got, v)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, m.Header.Get(relay.HeaderOccurredAt)); err != nil {
			t.Errorf("%s: occurred-at header: %v", id, err)
		}
	}
	for id := range want {
		rec, err := ob.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("%s: status %v attempts %d, want DONE 0", id, rec.Status, rec.Attempts)
		}
	}
}

// A redelivered event (the same id relayed again) is stored once: the
// stream's duplicate window drops it, and the relay counts the duplicate
// ack as delivered.
func TestRelayRedeliveryDeduplicated(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.NewEvent("Paid").PayloadJSONString(`{"x":1}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		if err := r.OnEvent(ctx, env); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if n := streamCount(t, st); n != 1 {
		t.Fatalf("%d messages in the stream after 3 deliveries of one event, want 1", n)
	}
	// Event headers in the "Nats-" namespace are JetStream's controls: the
	// relay drops them (here one that would make JetStream refuse it).
	env2, err := core.NewEvent("Paid").Header("Nats-Expected-Stream", "ANOTHER").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(ctx, env2); err != nil {
		t.Fatalf("event with a Nats-* header: %v", err)
	}
	if n := streamCount(t, st); n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
}

// A subject no stream listens on is the event's fault: it fails normally
// (RETRY, then DEAD), never put off as an outage; so do invalid subjects
// and messages the stream refuses.
func TestRelayRejection(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 512 })
	ctx := context.Background()

	orphan := "natsjs-nostream-" + uniq()
	r, err := natsjs.New(js, natsjs.Config{Subject: orphan + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.NewEvent("Lost").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	err = r.OnEvent(ctx, env)
	if !errors.Is(err, natsjs.ErrNoStream) || !errors.Is(err, natsjs.ErrRejected) || errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("publish to a subject without stream: %v; want ErrNoStream, not unavailable", err)
	}

	logger, logs := testsupport.NewLogger()
	ob := relaytest.Outbox(t, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{
		Workers: 2, MaxAttempts: 2, Retry: retry.Exponential{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}, r)
	relaytest.Publish(t, ob, env)
	testsupport.WaitFor(t, 30*time.Second, "the event DEAD", func() bool { return relaytest.Counts(t, ob)[core.StatusDead] == 1 })
	rec, err := ob.Get(ctx, env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 2 || !strings.Contains(rec.LastError, "no stream listens") {
		t.Errorf("attempts %d, last error %q", rec.Attempts, rec.LastError)
	}
	if n := logs.Count("broker unreachable"); n != 0 {
		t.Errorf("a rejection was reported as an outage:\n%s", logs)
	}

	// Invalid expanded subjects: an empty field, a SubjectFunc result.
	noAgg, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{aggregate_id}"})
	if err != nil {
		t.Fatal(err)
	}
	if err := noAgg.OnEvent(ctx, env); !errors.Is(err, natsjs.ErrInvalidSubject) || errors.Is(err, core.ErrUnavailable) {
		t.Errorf("empty token: %v", err)
	}
	for _, subj := range []string{"a b", prefix + ".*", prefix + ".>", "", prefix + "..x"} {
		fn, err := natsjs.New(js, natsjs.Config{SubjectFunc: func(core.Envelope) (string, error) { return subj, nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := fn.OnEvent(ctx, env); !errors.Is(err, natsjs.ErrInvalidSubject) {
			t.Errorf("SubjectFunc %q: %v", subj, err)
		}
	}
	boom := errors.New("no subject for you")
	fn, err := natsjs.New(js, natsjs.Config{SubjectFunc: func(core.Envelope) (string, error) { return "", boom }})
	if err != nil {
		t.Fatal(err)
	}
	if err := fn.OnEvent(ctx, env); !errors.Is(err, boom) || errors.Is(err, core.ErrUnavailable) {
		t.Errorf("SubjectFunc error: %v", err)
	}

	// Larger than the stream's MaxMsgSize; and a stream other than ExpectStream.
	ok, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	big, err := core.NewEvent("Big").PayloadBytes(make([]byte, 4096)).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.OnEvent(ctx, big); !errors.Is(err, natsjs.ErrRejected) || errors.Is(err, core.ErrUnavailable) {
		t.Errorf("message over MaxMsgSize: %v", err)
	}
	wrong, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}", ExpectStream: "NOT_THIS_ONE"})
	if err != nil {
		t.Fatal(err)
	}
	if err := wrong.OnEvent(ctx, env); !errors.Is(err, natsjs.ErrRejected) || errors.Is(err, core.ErrUnavailable) {
		t.Errorf("ExpectStream mismatch: %v", err)
	}
	if n := streamCount(t, st); n != 0 {
		t.Errorf("%d messages stored, want none", n)
	}
}

// Ordered events reach the stream in per-key order: the relay returns
// only after the ack and the dispatcher hands out a key's next event only
// after that.
func TestRelayOrdered(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{aggregate_type}.{aggregate_id}"})
	if err != nil {
		t.Fatal(err)
	}
	ob := relaytest.Outbox(t, outbox.Config{Ordering: core.Ordering{Types: []string{"*"}}, Dispatcher: dispatcher.Config{Workers: 8}}, r)
	const keys, perKey = 5, 20
	for i := range perKey {
		// Each transaction publishes the next event of every key.
		err := ob.InTx(context.Background(), func(ctx context.Context) error {
			for k := range keys {
				env, err := core.NewEvent("Moved").AggregateType("Acct").AggregateID(fmt.Sprint(k)).
					PayloadJSONString(fmt.Sprintf(`{"seq":%d}`, i)).Build()
				if err != nil {
					return err
				}
				if _, err := ob.Publish(ctx, env); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	testsupport.WaitFor(t, 60*time.Second, "every event DONE", func() bool { return relaytest.Counts(t, ob)[core.StatusDone] == keys*perKey })
	next := map[string]int{}
	for _, m := range streamMsgs(t, st) {
		key := m.Header.Get(relay.HeaderAggregateID)
		if want := fmt.Sprintf(`{"seq":%d}`, next[key]); string(m.Data) != want {
			t.Fatalf("key %s: stream seq %d holds %s, want %s", key, m.Sequence, m.Data, want)
		}
		next[key]++
	}
	for k := range keys {
		if next[fmt.Sprint(k)] != perKey {
			t.Errorf("key %d: %d events in the stream, want %d", k, next[fmt.Sprint(k)], perKey)
		}
	}
}

// Close waits for the publishes under way, then OnEvent puts events off.
func TestRelayClose(t *testing.T) {
	_, js := connect(t)
	_, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.NewEvent("X").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	err = r.OnEvent(context.Background(), env)
	if !errors.Is(err, natsjs.ErrClosed) || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("OnEvent after Close: %v", err)
	}
}
