package prometheus_test

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/internal/relaytest"
	outboxprom "github.com/outbox-go/outbox/prometheus"
	"github.com/outbox-go/outbox/relay"
)

// The Collector is a relay.Metrics: the broker's state as a gauge, each
// outage begun counted once (a second report of the same outage is not
// another), the full destinations as a gauge.
func TestRelayMetrics(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	var m relay.Metrics = c
	nats := labels{"broker": "nats jetstream nats://127.0.0.1:4222"}
	rabbit := labels{"broker": "rabbitmq amqp://guest@127.0.0.1:5672/"}

	m.BrokerUp(nats["broker"], true)
	wantValue(t, g, "outbox_relay_broker_up", nats, 1)
	if _, s := series(t, g, "outbox_relay_outages_total", nats); s == nil {
		t.Error("no outbox_relay_outages_total series at 0 before the first outage: increase() would miss it")
	}
	if _, s := series(t, g, "outbox_relay_full_destinations", nats); s != nil {
		t.Error("outbox_relay_full_destinations reported before FullDestinations")
	}

	m.BrokerUp(nats["broker"], false)
	m.BrokerUp(nats["broker"], false) // the same outage
	wantValue(t, g, "outbox_relay_broker_up", nats, 0)
	wantValue(t, g, "outbox_relay_outages_total", nats, 1)
	m.BrokerUp(nats["broker"], true)
	wantValue(t, g, "outbox_relay_broker_up", nats, 1)
	m.BrokerUp(nats["broker"], false)
	wantValue(t, g, "outbox_relay_outages_total", nats, 2)

	m.FullDestinations(rabbit["broker"], 2) // a broker's first signal
	wantValue(t, g, "outbox_relay_full_destinations", rabbit, 2)
	wantValue(t, g, "outbox_relay_outages_total", rabbit, 0)
	if _, s := series(t, g, "outbox_relay_broker_up", rabbit); s != nil {
		t.Error("outbox_relay_broker_up reported before BrokerUp (it would read as down)")
	}
	m.BrokerUp(rabbit["broker"], false) // down at its first report: an outage
	wantValue(t, g, "outbox_relay_outages_total", rabbit, 1)
	wantValue(t, g, "outbox_relay_broker_up", rabbit, 0)
	m.FullDestinations(rabbit["broker"], 0)
	wantValue(t, g, "outbox_relay_full_destinations", rabbit, 0)
	m.FullDestinations(rabbit["broker"], -1) // never negative
	wantValue(t, g, "outbox_relay_full_destinations", rabbit, 0)

	wantValue(t, g, "outbox_relay_outages_total", nats, 2)
	wantValue(t, g, "outbox_relay_broker_up", nats, 0)

	c.ForgetStore(nats["broker"]) // a store of that name: the relays' series stay
	wantValue(t, g, "outbox_relay_outages_total", nats, 2)
}

// A relay's Breaker and Full given the Collector as their Metrics report
// through it: the broker up at creation, one outage for several failures,
// up again at the first publish that answers; the destinations full.
func TestRelayMetricsFromBreakerAndFull(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	quiet := slog.New(slog.DiscardHandler)
	broker := labels{"broker": "rabbitmq amqp://guest@rabbit:5672/"}
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: broker["broker"], Logger: quiet, Metrics: c})
	if err != nil {
		t.Fatal(err)
	}
	f := relaytest.Full(t, relay.FullConfig{Name: broker["broker"], Logger: quiet, Metrics: c})
	wantValue(t, g, "outbox_relay_broker_up", broker, 1)
	wantValue(t, g, "outbox_relay_full_destinations", broker, 0)

	nacked := errors.New("rabbitmq: nacked")
	queue := func(q string) func() string { return func() string { return q } }
	_ = f.Refused("orders/created", nacked, queue("orders"))
	_ = f.Refused("billing/paid", nacked, queue("billing"))
	wantValue(t, g, "outbox_relay_full_destinations", broker, 2)
	f.Accepted("orders/created")
	wantValue(t, g, "outbox_relay_full_destinations", broker, 1)

	_ = b.Down(errors.New("connection reset"))
	_ = b.Down(errors.New("connection reset"))
	wantValue(t, g, "outbox_relay_broker_up", broker, 0)
	wantValue(t, g, "outbox_relay_outages_total", broker, 1)
	b.Up()
	wantValue(t, g, "outbox_relay_broker_up", broker, 1)
	wantValue(t, g, "outbox_relay_outages_total", broker, 1)
}

// A broker named like the label of the brokers past the bound is counted
// with them, taking no place of its own (as an event type so named).
func TestBrokerNamedOther(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxBrokers: 1})
	g := c.Gatherer()
	c.BrokerUp(outboxprom.OtherEventType, false)
	c.BrokerUp("b0", true)
	c.BrokerUp("b1", true)
	wantValue(t, g, "outbox_relay_broker_up", labels{"broker": "b0"}, 1)
	wantValue(t, g, "outbox_relay_broker_up", labels{"broker": outboxprom.OtherEventType}, 0)
	c.BrokerUp(outboxprom.OtherEventType, true)
	wantValue(t, g, "outbox_relay_broker_up", labels{"broker": outboxprom.OtherEventType}, 1)
	if n := len(family(t, g, "outbox_relay_broker_up").GetMetric()); n != 2 {
		t.Errorf("%d broker series, want b0 and (other)", n)
	}
}

// The brokers after Config.MaxBrokers others share the broker label
// "(other)": down while any of them is down, their outages and full
// destinations added up. Brokers seen before keep their label.
func TestMaxBrokers(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxBrokers: 2})
	g := c.Gatherer()
	other := labels{"broker": outboxprom.OtherEventType}
	for _, b := range []string{"b0", "b1", "b2", "b3"} {
		c.BrokerUp(b, true)
	}
	c.BrokerUp("b0", false)
	wantValue(t, g, "outbox_relay_broker_up", labels{"broker": "b0"}, 0)
	wantValue(t, g, "outbox_relay_broker_up", other, 1)

	c.BrokerUp("b2", false)
	c.BrokerUp("b3", false)
	c.BrokerUp("b3", false) // the same outage
	wantValue(t, g, "outbox_relay_broker_up", other, 0)
	wantValue(t, g, "outbox_relay_outages_total", other, 2)
	c.BrokerUp("b2", true)
	wantValue(t, g, "outbox_relay_broker_up", other, 0) // b3 is still down
	c.BrokerUp("b3", true)
	c.BrokerUp("b3", true)
	wantValue(t, g, "outbox_relay_broker_up", other, 1)
	c.BrokerUp("b4", false) // down at its first report
	wantValue(t, g, "outbox_relay_broker_up", other, 0)
	wantValue(t, g, "outbox_relay_outages_total", other, 3)

	c.FullDestinations("b2", 2)
	c.FullDestinations("b3", 1)
	wantValue(t, g, "outbox_relay_full_destinations", other, 3)
	c.FullDestinations("b2", 0)
	wantValue(t, g, "outbox_relay_full_destinations", other, 1)
	c.FullDestinations("b1", 5)
	wantValue(t, g, "outbox_relay_full_destinations", labels{"broker": "b1"}, 5)
	wantValue(t, g, "outbox_relay_full_destinations", other, 1)

	if n := len(family(t, g, "outbox_relay_outages_total").GetMetric()); n != 3 {
		t.Errorf("%d broker series, want b0, b1 and (other)", n)
	}
	wantValue(t, g, "outbox_relay_outages_total", labels{"broker": "b0"}, 1)
}

// A broker name that is not valid UTF-8 would make the client library
// panic; the collector replaces the bad bytes instead.
func TestRelayMetricsInvalidUTF8(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	c.BrokerUp("nats \xff", false)
	c.FullDestinations("nats \xff", 1)
	wantValue(t, c.Gatherer(), "outbox_relay_outages_total", labels{"broker": "nats \uFFFD"}, 1)
	wantValue(t, c.Gatherer(), "outbox_relay_full_destinations", labels{"broker": "nats \uFFFD"}, 1)
}

// Relays report concurrently, some beyond MaxBrokers: every outage is
// counted (go test -race checks the rest).
func TestRelayMetricsConcurrent(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxBrokers: 2})
	g := c.Gatherer()
	const relays, outages = 6, 100
	var wg sync.WaitGroup
	for i := range relays {
		wg.Go(func() {
			broker := fmt.Sprintf("b%d", i)
			c.BrokerUp(broker, true)
			for j := range outages {
				c.BrokerUp(broker, false)
				c.FullDestinations(broker, j%3)
				c.BrokerUp(broker, true)
			}
			c.FullDestinations(broker, 1)
		})
	}
	wg.Wait()
	var total, full float64
	for _, s := range family(t, g, "outbox_relay_outages_total").GetMetric() {
		total += s.GetCounter().GetValue()
	}
	for _, s := range family(t, g, "outbox_relay_full_destinations").GetMetric() {
		full += s.GetGauge().GetValue()
	}
	if total != relays*outages || full != relays {
		t.Errorf("outages %v, full destinations %v; want %d, %d", total, full, relays*outages, relays)
	}
	for _, s := range family(t, g, "outbox_relay_broker_up").GetMetric() {
		if v := s.GetGauge().GetValue(); v != 1 {
			t.Errorf("outbox_relay_broker_up%v = %v, want 1", s.GetLabel(), v)
		}
	}
}
