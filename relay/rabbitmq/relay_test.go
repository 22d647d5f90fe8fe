package rabbitmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
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

const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// Every committed event reaches the bound queue once, as a persistent
// message carrying its id, type, time, headers and payload; every row is
// DONE without a failed attempt.
func TestRelayEndToEnd(t *testing.T) {
	ch := admin(t)
	ex := newExchange(t, ch)
	q := newQueue(t, ch, ex, "orders.#")
	got := consume(t, q)
	r := newRelay(t, rabbitmq.Config{Exchange: ex, RoutingKey: "orders.{type}"})
	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{Workers: 16}}, r)

	const n = 200
	want := map[string]core.Envelope{}
	for i := range n {
		env, err := core.NewEvent("OrderPlaced").AggregateType("Order").AggregateID(fmt.Sprint(i)).TenantID("acme").
			Header("traceparent", traceparent).PayloadJSONString(fmt.Sprintf(`{"n":%d}`, i)).Build()
		if err != nil {
			t.Fatal(err)
		}
		relaytest.Publish(t, ob, env)
		want[env.ID()] = env
	}
	bin, err := core.NewEvent("Blob").PayloadBytes([]byte{0, 1, 2}).Build()
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Publish(t, ob, bin)
	testsupport.WaitFor(t, 30*time.Second, "every event in the queue and DONE", func() bool {
		return got.count() >= n+1 && relaytest.Counts(t, ob)[core.StatusDone] == n+1
	}, got.wake)

	seen := map[string]int{}
	for _, d := range got.all() {
		seen[d.MessageId]++
		if d.MessageId == bin.ID() {
			if d.ContentType != "" || string(d.Body) != "\x00\x01\x02" || d.RoutingKey != "orders.Blob" {
				t.Errorf("bytes event: content type %q, body %q, key %q", d.ContentType, d.Body, d.RoutingKey)
			}
			continue
		}
		env, ok := want[d.MessageId]
		if !ok {
			t.Errorf("unexpected message %q", d.MessageId)
			continue
		}
		if d.DeliveryMode != amqp.Persistent || d.Type != "OrderPlaced" || d.ContentType != "application/json" ||
			d.RoutingKey != "orders.OrderPlaced" || d.Exchange != ex || string(d.Body) != env.PayloadString() ||
			!d.Timestamp.Equal(env.OccurredAt().Truncate(time.Second)) {
			t.Errorf("message %s: mode %d type %q content type %q key %q exchange %q body %q time %v (occurred %v)", d.MessageId,
				d.DeliveryMode, d.Type, d.ContentType, d.RoutingKey, d.Exchange, d.Body, d.Timestamp, env.OccurredAt())
		}
		wantHeaders := map[string]string{
			"traceparent": traceparent, relay.HeaderEventID: env.ID(), relay.HeaderEventType: "OrderPlaced",
			relay.HeaderAggregateType: "Order", relay.HeaderAggregateID: env.AggregateID(), relay.HeaderTenant: "acme",
			relay.HeaderOccurredAt: env.OccurredAt().UTC().Format(time.RFC3339Nano),
		}
		for k, v := range wantHeaders {
			if d.Headers[k] != v {
				t.Errorf("message %s: header %s = %v, want %q", d.MessageId, k, d.Headers[k], v)
			}
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("event %s arrived %d times, want once", id, seen[id])
		}
		rec, err := ob.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("event %s: %v with %d attempts, want DONE with 0", id, rec.Status, rec.Attempts)
		}
	}
}

// A mandatory message no queue is bound for is a failure of its event:
// retried, then DEAD, with ErrUnroutable's text in last_error. Nothing is
// lost silently.
func TestRelayUnroutable(t *testing.T) {
	ch := admin(t)
	ex := newExchange(t, ch) // no queue bound
	r := newRelay(t, rabbitmq.Config{Exchange: ex})

	env, err := core.JSONEvent("Nowhere", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	err = r.OnEvent(context.Background(), env)
	if !errors.Is(err, rabbitmq.ErrUnroutable) || errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "312 NO_ROUTE") {
		t.Fatalf("OnEvent = %v, want ErrUnroutable (312 NO_ROUTE), not an outage", err)
	}

	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{Workers: 2, MaxAttempts: 2,
		Retry: retry.Exponential{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}, r)
	relaytest.Publish(t, ob, env)
	testsupport.WaitFor(t, 30*time.Second, "the unroutable event DEAD", func() bool { return relaytest.Counts(t, ob)[core.StatusDead] == 1 })
	rec, err := ob.Get(context.Background(), env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 2 || !strings.Contains(rec.LastError, rabbitmq.ErrUnroutable.Error()) {
		t.Errorf("record: %d attempts, last error %q", rec.Attempts, rec.LastError)
	}

	// With AllowUnroutable the broker drops it and the event counts as
	// delivered.
	lax := newRelay(t, rabbitmq.Config{Exchange: ex, AllowUnroutable: true})
	if err := lax.OnEvent(context.Background(), env); err != nil {
		t.Errorf("AllowUnroutable: %v", err)
	}
}

// A missing exchange closes the channel (404): that event fails with
// ErrRefused, the relay opens a new channel, and the events waiting on
// the closed channel are published again: none of them fails.
func TestRelayMissingExchange(t *testing.T) {
	ex, got := consumedExchange(t)
	// The exchange comes from the event's tenant: "missing-..." names none.
	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{Exchange: "{tenant}", Channels: 1, Logger: logger})

	event := func(tenant string) core.Envelope { return tenantEvent(t, tenant) }
	missing := "rabbitmq-test-missing-" + uniq()
	err := r.OnEvent(context.Background(), event(missing))
	var ae *amqp.Error
	if !errors.Is(err, rabbitmq.ErrRefused) || !errors.As(err, &ae) || ae.Code != amqp.NotFound || errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("OnEvent to a missing exchange = %v, want ErrRefused with 404, not an outage", err)
	}
	if err := r.OnEvent(context.Background(), event(ex)); err != nil {
		t.Fatalf("the next event after the channel was closed: %v", err)
	}

	// Good and bad events at once on the one channel.
	const good = 100
	var wg sync.WaitGroup
	errs := make(chan error, good+5)
	for i := range good + 5 {
		wg.Go(func() {
			if i%21 == 20 {
				if err := r.OnEvent(context.Background(), event(missing)); !errors.Is(err, rabbitmq.ErrRefused) {
					errs <- fmt.Errorf("bad event: %v", err)
				}
				return
			}
			if err := r.OnEvent(context.Background(), event(ex)); err != nil {
				errs <- fmt.Errorf("good event: %w", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the good events in the queue", func() bool { return got.count() >= good+1 }, got.wake)
	if n := logs.Count("level=WARN", "closed a publishing channel", "code=404"); n == 0 {
		t.Errorf("no WARN for the closed channel:\n%s", logs)
	}
}

// A burst of events to missing exchanges on one channel, among good
// ones: a bad event gets ErrRefused (for its own 404, or, when another's
// closed its channel first, once published again alone), and a good one
// is never charged for the others: the relay publishes it again alone,
// on a channel of its own, where it is confirmed.
func TestRelayManyBadNeighbours(t *testing.T) {
	ex, _ := routedExchange(t)
	logger, _ := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{Exchange: "{tenant}", Channels: 1, Logger: logger})
	refusedAmongGood(t, r, ex, 4, func() error { // each to an exchange of its own, missing
		missing := "rabbitmq-test-missing-" + uniq()
		err := r.OnEvent(context.Background(), tenantEvent(t, missing))
		if !errors.Is(err, rabbitmq.ErrRefused) || errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "'"+missing+"'") {
			return fmt.Errorf("%v, want ErrRefused for its own exchange", err)
		}
		return nil
	})
}

// Events the outbox orders per key reach the queue in per-key commit
// order, with many workers: the relay returns only after the confirm.
func TestRelayOrdered(t *testing.T) {
	ex, got := consumedExchange(t)
	r := newRelay(t, rabbitmq.Config{Exchange: ex})
	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{Workers: 16},
		Ordering: core.Ordering{Types: []string{"Moved"}}}, r)

	const keys, per = 5, 40
	for i := range per {
		for k := range keys {
			env, err := core.NewEvent("Moved").AggregateType("Account").AggregateID(fmt.Sprint(k)).
				PayloadJSONString(fmt.Sprintf(`{"k":%d,"i":%d}`, k, i)).Build()
			if err != nil {
				t.Fatal(err)
			}
			relaytest.Publish(t, ob, env)
		}
	}
	testsupport.WaitFor(t, 60*time.Second, "every ordered event in the queue", func() bool { return got.count() >= keys*per }, got.wake)
	next := make([]int, keys)
	for _, d := range got.all() {
		var p struct{ K, I int }
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatal(err)
		}
		if p.I != next[p.K] {
			t.Fatalf("key %d: event %d arrived when %d was next", p.K, p.I, next[p.K])
		}
		next[p.K]++
	}
}

// An event that cannot travel as an AMQP message fails at once with
// ErrInvalidMessage; the relay keeps working.
func TestRelayInvalidMessage(t *testing.T) {
	ch := admin(t)
	q := newQueue(t, ch, "", "")
	r := newRelay(t, rabbitmq.Config{RoutingKey: "{aggregate_id}"}) // default exchange: the key names the queue
	// 128 characters (the outbox's limits) of two bytes each: 256 bytes.
	long, err := core.NewEvent("T").AggregateType("A").AggregateID(strings.Repeat("é", 128)).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), long); !errors.Is(err, rabbitmq.ErrInvalidMessage) || !strings.Contains(err.Error(), "routing key") {
		t.Errorf("256-byte routing key: %v, want ErrInvalidMessage", err)
	}
	typ, err := core.NewEvent(strings.Repeat("é", 128)).AggregateType("A").AggregateID(q).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), typ); !errors.Is(err, rabbitmq.ErrInvalidMessage) || !strings.Contains(err.Error(), "event type") {
		t.Errorf("256-byte type: %v, want ErrInvalidMessage", err)
	}
	// A header name of 128 characters (the outbox's limit) of two bytes
	// each: more than AMQP's 255 bytes.
	hdr, err := core.NewEvent("T").AggregateType("A").AggregateID(q).Header(strings.Repeat("é", 128), "v").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), hdr); !errors.Is(err, rabbitmq.ErrInvalidMessage) {
		t.Errorf("256-byte header name: %v, want ErrInvalidMessage", err)
	}
	ok, err := core.NewEvent("T").AggregateType("A").AggregateID(q).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), ok); err != nil {
		t.Errorf("a valid event to the default exchange: %v", err)
	}
}

// After Close, OnEvent puts events off (core.Unavailable wrapping
// core.ErrClosed) instead of failing them; Close may be called again.
func TestRelayClose(t *testing.T) {
	admin(t)
	r, err := rabbitmq.New(context.Background(), rabbitmq.Config{URL: amqpURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	env, err := core.JSONEvent("T", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	err = r.OnEvent(context.Background(), env)
	var ue *core.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, core.ErrClosed) {
		t.Fatalf("OnEvent after Close = %v", err)
	}
	if ue.After != relay.DefaultRetryAfter {
		t.Errorf("OnEvent after Close puts the event off for %v, want Breaker.RetryAfter's default %v", ue.After, relay.DefaultRetryAfter)
	}

	// As the NATS relay does, with the configured RetryAfter.
	r, err = rabbitmq.New(context.Background(), rabbitmq.Config{URL: amqpURL(), Breaker: relay.BreakerConfig{RetryAfter: 7 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), env); !errors.As(err, &ue) || ue.After != 7*time.Second {
		t.Errorf("OnEvent after Close = %v, want a core.Unavailable error with After 7s", err)
	}
}

// An Exchange template that expands to "" for an event (a field the event
// does not have) fails it with ErrInvalidMessage, a normal failure,
// instead of publishing it to the default exchange, which would route it
// to the queue its routing key names. An Exchange of "" is the default
// exchange, as documented.
func TestRelayEmptyExchangeFromTemplate(t *testing.T) {
	ch := admin(t)
	q := newQueue(t, ch, "", "")
	got := consume(t, q)
	r := newRelay(t, rabbitmq.Config{Exchange: "{tenant}", RoutingKey: q})
	noTenant, err := core.JSONEvent("T", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	err = r.OnEvent(context.Background(), noTenant)
	if !errors.Is(err, rabbitmq.ErrInvalidMessage) || errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "{tenant}") {
		t.Errorf("an event whose exchange expands to \"\": %v, want ErrInvalidMessage naming the template", err)
	}

	def := newRelay(t, rabbitmq.Config{RoutingKey: q}) // the default exchange
	marker, err := core.JSONEvent("Marker", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := def.OnEvent(context.Background(), marker); err != nil {
		t.Fatalf("the default exchange: %v", err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the marker in the queue", func() bool { return got.count() >= 1 }, got.wake)
	if msgs := got.all(); msgs[0].MessageId != marker.ID() {
		t.Errorf("the queue got %s before the marker: the event without a tenant went to the default exchange", msgs[0].MessageId)
	}
}

// A listener deadline that ends while every MaxInFlight slot is taken
// (publishes awaiting their confirm) puts the event off without charging
// it (core.Unavailable), and does not open the breaker: busy slots are
// backpressure, and the publishes holding them report an outage
// themselves if their confirms do not come. The next publish goes through
// with no "recovered" line.
func TestRelaySlotWaitDeadline(t *testing.T) {
	ex, _ := routedExchange(t)
	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{Exchange: ex, MaxInFlight: 1, Logger: logger})
	env, err := core.JSONEvent("a.b", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	release := rabbitmq.TakeSlots(r, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err = r.OnEvent(ctx, env)
	cancel()
	var ue *core.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OnEvent whose deadline ends waiting for a slot = %v, want a core.Unavailable error wrapping context.DeadlineExceeded", err)
	}
	release()
	if err := r.OnEvent(context.Background(), env); err != nil {
		t.Fatalf("OnEvent with a free slot: %v", err)
	}
	if n := logs.Count("level=ERROR") + logs.Count("broker recovered"); n != 0 {
		t.Errorf("the breaker opened for a slot wait:\n%s", logs)
	}
}

// tenantEvent is an event of type T for tenant (the exchange "{tenant}"
// routes it by).
func tenantEvent(t *testing.T, tenant string) core.Envelope {
	t.Helper()
	env, err := core.NewEvent("T").TenantID(tenant).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}
