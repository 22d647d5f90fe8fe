package otel

import (
	"sync/atomic"
)

// brokerInfo is the attribute set of one relay's broker and whether it
// was last reported down.
type brokerInfo struct {
	set  *measureSet
	down atomic.Bool
}

// brokerOf returns the brokerInfo of broker, built on its first signal:
// outbox.relay.outages starts at 0 then, so that the first outage is an
// increase.
func (o *Observer) brokerOf(broker string) *brokerInfo {
	return cached(&o.relays, broker, func() *brokerInfo {
		b := &brokerInfo{set: newMeasureSet(systemAttr, AttrRelayBroker.String(broker))}
		o.inst.relayOutages.Add(bg, 0, b.set.add...)
		return b
	})
}

// BrokerUp implements relay.Metrics: it records outbox.relay.broker.up, 1
// when up and 0 when down, and counts outbox.relay.outages when the
// broker goes down after it was up or before any report (the relays report
// each outage once, at its start). Pass the Observer as a broker relay's
// Config.Metrics.
func (o *Observer) BrokerUp(broker string, up bool) {
	b := o.brokerOf(broker)
	if up {
		b.down.Store(false)
		o.inst.relayBrokerUp.Record(bg, 1, b.set.rec...)
		return
	}
	if !b.down.Swap(true) {
		o.inst.relayOutages.Add(bg, 1, b.set.add...)
	}
	o.inst.relayBrokerUp.Record(bg, 0, b.set.rec...)
}

// FullDestinations implements relay.Metrics: it records
// outbox.relay.full_destinations, the number of the broker's destinations
// (streams, queues) refusing messages for want of room.
func (o *Observer) FullDestinations(broker string, n int) {
	o.inst.relayFull.Record(bg, int64(max(0, n)), o.brokerOf(broker).set.rec...)
}
