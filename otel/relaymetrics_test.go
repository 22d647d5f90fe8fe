package otel_test

import (
	"errors"
	"log/slog"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outbox-go/outbox/internal/relaytest"
	obsotel "github.com/outbox-go/outbox/otel"
	"github.com/outbox-go/outbox/relay"
)

// brokerLabels are the attributes of a relay's broker signals.
func brokerLabels(broker string) map[string]string {
	return map[string]string{"outbox.relay.broker": broker, "messaging.system": "outbox"}
}

// wantPoint fails t unless the data point of metric name with labels has
// value v.
func wantPoint(t *testing.T, h *harness, name string, labels map[string]string, v float64) {
	t.Helper()
	if got := metricPoint(t, h.collect(t), name, labels).value; got != v {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

// The Observer is a relay.Metrics: the broker's state as a gauge, each
// outage begun counted once (a second report of the same outage is not
// another), the full destinations as a gauge.
func TestRelayMetrics(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	var m relay.Metrics = h.obs
	nats, rabbit := "nats jetstream nats://127.0.0.1:4222", "rabbitmq amqp://guest@127.0.0.1:5672/"
	nl, rl := brokerLabels(nats), brokerLabels(rabbit)

	m.BrokerUp(nats, true)
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, nl, 1)
	wantPoint(t, h, obsotel.MetricRelayOutages, nl, 0) // there from the first report: the first outage is an increase

	m.BrokerUp(nats, false)
	m.BrokerUp(nats, false) // the same outage
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, nl, 0)
	wantPoint(t, h, obsotel.MetricRelayOutages, nl, 1)

	m.BrokerUp(nats, true)
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, nl, 1)
	m.BrokerUp(nats, false)
	wantPoint(t, h, obsotel.MetricRelayOutages, nl, 2)

	m.BrokerUp(rabbit, false) // down at its first report: an outage
	wantPoint(t, h, obsotel.MetricRelayOutages, rl, 1)
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, rl, 0)
	wantPoint(t, h, obsotel.MetricRelayOutages, nl, 2)

	m.FullDestinations(rabbit, 2)
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, rl, 2)
	m.FullDestinations(rabbit, 0)
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, rl, 0)
	m.FullDestinations(rabbit, -1) // never negative
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, rl, 0)

	ms := h.collect(t)
	if s, ok := ms[obsotel.MetricRelayOutages].Data.(metricdata.Sum[int64]); !ok || !s.IsMonotonic {
		t.Errorf("%s is a %T, want a monotonic Sum[int64] (a counter)", obsotel.MetricRelayOutages, ms[obsotel.MetricRelayOutages].Data)
	}
	for _, name := range []string{obsotel.MetricRelayBrokerUp, obsotel.MetricRelayFullDestinations} {
		if _, ok := ms[name].Data.(metricdata.Gauge[int64]); !ok {
			t.Errorf("%s is a %T, want a Gauge[int64]", name, ms[name].Data)
		}
	}
}

// A relay's Breaker and Full given the Observer as their Metrics report
// through it: the broker up at creation, one outage for several failures,
// up again at the first publish that answers; the destinations full.
func TestRelayMetricsFromBreakerAndFull(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	quiet := slog.New(slog.DiscardHandler)
	const name = "nats jetstream nats://nats:4222"
	l := brokerLabels(name)
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: name, Logger: quiet, Metrics: h.obs})
	if err != nil {
		t.Fatal(err)
	}
	f := relaytest.Full(t, relay.FullConfig{Name: name, Logger: quiet, Metrics: h.obs})
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, l, 1)
	wantPoint(t, h, obsotel.MetricRelayOutages, l, 0)
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, l, 0)

	refused := errors.New("nats: maximum messages exceeded")
	stream := func(s string) func() string { return func() string { return s } }
	_ = f.Refused("orders.created", refused, stream("ORDERS"))
	_ = f.Refused("billing.paid", refused, stream("BILLING"))
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, l, 2)
	f.Accepted("orders.created")
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, l, 1)

	_ = b.Down(errors.New("nats: connection closed"))
	_ = b.Down(errors.New("nats: connection closed"))
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, l, 0)
	wantPoint(t, h, obsotel.MetricRelayOutages, l, 1)
	b.Up()
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, l, 1)
	wantPoint(t, h, obsotel.MetricRelayOutages, l, 1)
}

// Relays report concurrently, each its own broker: every outage is
// counted on its broker (go test -race checks the rest).
func TestRelayMetricsConcurrent(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	brokers := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	for _, broker := range brokers {
		wg.Go(func() {
			h.obs.BrokerUp(broker, true)
			for i := range 100 {
				h.obs.BrokerUp(broker, false)
				h.obs.FullDestinations(broker, i%3)
				h.obs.BrokerUp(broker, true)
			}
			h.obs.FullDestinations(broker, 1)
		})
	}
	wg.Wait()
	for _, broker := range brokers {
		l := brokerLabels(broker)
		wantPoint(t, h, obsotel.MetricRelayOutages, l, 100)
		wantPoint(t, h, obsotel.MetricRelayBrokerUp, l, 1)
		wantPoint(t, h, obsotel.MetricRelayFullDestinations, l, 1)
	}
}
