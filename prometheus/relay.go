package prometheus

import (
	"sync"

	prom "github.com/prometheus/client_golang/prometheus"
)

// relayStates is the state of the brokers whose relays report to a
// Collector (relay.Metrics). The relays report changes only (an outage
// beginning or ending, a destination filling up or taking messages
// again), so one mutex serves them all.
type relayStates struct {
	max int // brokers with a label of their own, Config.MaxBrokers

	mu       sync.Mutex
	brokers  map[string]*brokerState // by broker name
	labelled int                     // brokers with a label of their own
	other    *brokerSeries           // the brokers beyond max; nil until the first
	// Of the brokers under other: how many are down, and their full
	// destinations.
	otherDown, otherFull int
}

// brokerState is one broker's last reported state.
type brokerState struct {
	down   bool // as last reported
	full   int
	series *brokerSeries // its own, or relayStates.other
}

// brokerSeries are the series of one broker label.
type brokerSeries struct {
	label   string
	outages prom.Counter
}

// brokerLocked returns broker's state, created on its first signal with
// its outbox_relay_outages_total series at 0, so that rate() and
// increase() see its first outage. r.mu is held.
func (c *Collector) brokerLocked(broker string) *brokerState {
	r := &c.relays
	if b, ok := r.brokers[broker]; ok {
		return b
	}
	b := &brokerState{}
	switch {
	case broker != OtherEventType && r.labelled < r.max: // a broker named so is other's
		label := validLabel(broker)
		b.series = &brokerSeries{label: label, outages: c.relayOutages.WithLabelValues(label)}
		r.labelled++
	case r.other == nil:
		r.other = &brokerSeries{label: OtherEventType, outages: c.relayOutages.WithLabelValues(OtherEventType)}
		fallthrough
	default:
		b.series = r.other
	}
	if r.brokers == nil {
		r.brokers = make(map[string]*brokerState)
	}
	r.brokers[broker] = b
	return b
}

// BrokerUp implements relay.Metrics: it sets
// outbox_relay_broker_up{broker} to 1 when up, 0 when down, and counts
// outbox_relay_outages_total{broker} when the broker goes down after it
// was up or before any report (the relays report each outage once, at its
// start). Give the Collector to a broker relay as its Config.Metrics.
func (c *Collector) BrokerUp(broker string, up bool) {
	r := &c.relays
	r.mu.Lock()
	defer r.mu.Unlock()
	b := c.brokerLocked(broker)
	wasDown := b.down
	b.down = !up
	if !up && !wasDown {
		b.series.outages.Inc()
	}
	if b.series != r.other {
		c.relayBrokerUp.WithLabelValues(b.series.label).Set(boolValue(up))
		return
	}
	switch {
	case wasDown && up:
		r.otherDown--
	case !wasDown && !up:
		r.otherDown++
	}
	c.relayBrokerUp.WithLabelValues(OtherEventType).Set(boolValue(r.otherDown == 0))
}

// FullDestinations implements relay.Metrics: it sets
// outbox_relay_full_destinations{broker}, the number of the broker's
// destinations (streams, queues) refusing messages for want of room.
func (c *Collector) FullDestinations(broker string, n int) {
	n = max(0, n)
	r := &c.relays
	r.mu.Lock()
	defer r.mu.Unlock()
	b := c.brokerLocked(broker)
	if b.series != r.other {
		b.full = n
		c.relayFull.WithLabelValues(b.series.label).Set(float64(n))
		return
	}
	r.otherFull += n - b.full
	b.full = n
	c.relayFull.WithLabelValues(OtherEventType).Set(float64(r.otherFull))
}

// boolValue is 1 for true, 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
