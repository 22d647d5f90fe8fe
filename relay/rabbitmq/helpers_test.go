package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// amqpURL is the shared test broker: OUTBOX_TEST_AMQP_URL, by default the
// local one.
func amqpURL() string {
	if u := os.Getenv("OUTBOX_TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// admin opens a connection and channel to the shared broker for the
// test's own declarations and reads, closed in Cleanup. Without a broker
// the test skips, or fails when CI=true.
func admin(t testing.TB) *amqp.Channel {
	t.Helper()
	conn, err := amqp.DialConfig(amqpURL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("RabbitMQ at %s: %v", amqpURL(), err)
		}
		t.Skipf("no RabbitMQ at %s (set OUTBOX_TEST_AMQP_URL): %v", amqpURL(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// uniq returns a random suffix for exchange and queue names.
func uniq() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newExchange declares a durable topic exchange named after the test and
// deletes it in Cleanup.
func newExchange(t testing.TB, ch *amqp.Channel) string {
	t.Helper()
	name := "rabbitmq-test-x-" + uniq()
	if err := ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatalf("declare exchange %s: %v", name, err)
	}
	t.Cleanup(func() {
		deleteWith(t, func(c *amqp.Channel) error { return c.ExchangeDelete(name, false, false) })
	})
	return name
}

// newQueue declares a durable queue named after the test, bound to
// exchange with pattern when exchange is not empty, and deletes it in
// Cleanup.
func newQueue(t testing.TB, ch *amqp.Channel, exchange, pattern string) string {
	t.Helper()
	return newQueueWith(t, ch, exchange, pattern, nil)
}

// newQueueWith is newQueue with the queue's arguments (x-max-length,
// x-overflow, …).
func newQueueWith(t testing.TB, ch *amqp.Channel, exchange, pattern string, args amqp.Table) string {
	t.Helper()
	name := "rabbitmq-test-q-" + uniq()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declare queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		deleteWith(t, func(c *amqp.Channel) error { _, err := c.QueueDelete(name, false, false, false); return err })
	})
	if exchange != "" {
		if err := ch.QueueBind(name, pattern, exchange, false, nil); err != nil {
			t.Fatalf("bind %s to %s: %v", name, exchange, err)
		}
	}
	return name
}

// deleteWith runs a delete on a fresh connection, so that it works even
// when the test's admin channel was closed by the broker.
func deleteWith(t testing.TB, del func(*amqp.Channel) error) {
	t.Helper()
	conn, err := amqp.DialConfig(amqpURL(), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	if err := del(ch); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// collector consumes a queue into memory until Cleanup.
type collector struct {
	mu   sync.Mutex
	msgs []amqp.Delivery
	wake chan struct{}
}

// consume starts consuming queue (auto-ack) of the shared broker on a
// channel of its own.
func consume(t testing.TB, queue string) *collector {
	t.Helper()
	return consumeAt(t, amqpURL(), queue)
}

// consumedExchange returns a new exchange with a queue bound to every
// routing key ("#") and the collector of that queue's messages.
func consumedExchange(t testing.TB) (string, *collector) {
	t.Helper()
	ex, q := routedExchange(t)
	return ex, consume(t, q)
}

// routedExchange returns a new exchange and a queue bound to it for
// every routing key ("#"), so that every message sent to it is routed.
func routedExchange(t testing.TB) (exchange, queue string) {
	t.Helper()
	ch := admin(t)
	ex := newExchange(t, ch)
	return ex, newQueue(t, ch, ex, "#")
}

// consumeAt starts consuming queue (auto-ack) of the broker at url on a
// channel of its own.
func consumeAt(t testing.TB, url, queue string) *collector {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{wake: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range deliveries {
			c.mu.Lock()
			c.msgs = append(c.msgs, d)
			c.mu.Unlock()
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
	return c
}

// all returns the messages received so far, in arrival order.
func (c *collector) all() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]amqp.Delivery(nil), c.msgs...)
}

// count returns how many messages arrived.
func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

// newRelay makes a relay on the shared broker with cfg (URL filled in)
// and closes it in Cleanup.
func newRelay(t testing.TB, cfg rabbitmq.Config) *rabbitmq.Relay {
	t.Helper()
	if cfg.URL == "" && cfg.Dial == nil {
		cfg.URL = amqpURL()
	}
	r, err := rabbitmq.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("close relay: %v", err)
		}
	})
	return r
}

// waitAllRelayed waits until every event of ids is in the queue got reads
// and DONE, checks that each is there and DONE with no attempt charged
// (a broker outage must not cost attempts), and returns the count of each
// message id received and the redelivered duplicates.
func waitAllRelayed(t *testing.T, ob *outbox.Outbox, got *collector, ids []string) (stored map[string]int, dups int) {
	t.Helper()
	inQueue := func() map[string]int {
		m := map[string]int{}
		for _, d := range got.all() {
			m[d.MessageId]++
		}
		return m
	}
	testsupport.WaitFor(t, 90*time.Second, "every committed event in the queue and DONE", func() bool {
		return len(inQueue()) >= len(ids) && relaytest.Counts(t, ob)[core.StatusDone] == len(ids)
	}, got.wake)
	stored = inQueue()
	for _, id := range ids {
		if stored[id] == 0 {
			t.Errorf("event %s is not in the queue", id)
		}
		dups += max(stored[id]-1, 0)
		rec, err := ob.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("event %s: %v with %d attempts, want DONE with 0", id, rec.Status, rec.Attempts)
		}
	}
	return stored, dups
}

// afterOutage ends an outage test once the broker is back: it waits for
// 50 more events committed, stops the publisher, waits until every
// committed event is in the queue and DONE with no attempt charged, and
// checks that nothing is DEAD or RETRY and that the outage logged exactly
// one ERROR and one "recovered" line. It returns the committed ids, the
// count of each id in the queue and the redelivered duplicates.
func afterOutage(t *testing.T, ob *outbox.Outbox, got *collector, pub *relaytest.Publisher, logs *testsupport.LogBuffer) (ids []string, stored map[string]int, dups int) {
	t.Helper()
	after := pub.Count() + 50
	testsupport.WaitFor(t, 30*time.Second, "events committed after the outage", func() bool { return pub.Count() >= after })
	ids = pub.Stop()
	stored, dups = waitAllRelayed(t, ob, got, ids)
	if c := relaytest.Counts(t, ob); c[core.StatusDead] != 0 || c[core.StatusRetry] != 0 {
		t.Errorf("statuses after the outage: %v", c)
	}
	// The "recovered" line comes once publishes went through for the
	// breaker's Settle.
	testsupport.WaitFor(t, 60*time.Second, "the recovered line", func() bool { return logs.Count("level=INFO", "broker recovered") > 0 })
	if down, up := logs.Count("level=ERROR", "broker unreachable"), logs.Count("level=INFO", "broker recovered"); down != 1 || up != 1 {
		t.Errorf("%d ERROR lines and %d recovered lines, want 1 and 1", down, up)
	}
	return ids, stored, dups
}

// nilMetrics is a relay.Metrics whose nil value must be refused.
type nilMetrics struct{ n int }

func (m *nilMetrics) BrokerUp(string, bool)        { m.n++ }
func (m *nilMetrics) FullDestinations(string, int) { m.n++ }

// probingRelay returns newRelay(cfg) with a log, metrics and a clock of
// the test's: its breaker and its full destinations probe once an hour on
// that clock (were the breaker opened, other events would be put off;
// advance the clock for a nacked routing key's next probe).
func probingRelay(t testing.TB, cfg rabbitmq.Config) (*rabbitmq.Relay, *testsupport.LogBuffer, *relaytest.Metrics, *testsupport.Clock) {
	t.Helper()
	logger, logs := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	clock := testsupport.NewClock(time.Now())
	cfg.Logger, cfg.Metrics = logger, m
	cfg.Breaker.ProbeInterval, cfg.Breaker.Now = time.Hour, clock.Now
	return newRelay(t, cfg), logs, m, clock
}

// typedEvent returns an event of type typ with a one-byte payload.
func typedEvent(t testing.TB, typ string) core.Envelope {
	t.Helper()
	env, err := core.NewEvent(typ).PayloadBytes([]byte("x")).Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}
