package relay

// Metrics receives the signals of a relay's own state, beside the
// delivery metrics the outbox records for every listener (a relay's
// deliveries, their outcomes and durations, the events put off): whether
// its broker can be reached, and how many of its destinations are full.
// The OpenTelemetry Observer and the Prometheus Collector of this
// repository implement it; pass one as the relay's Config.Metrics.
//
// broker is the breaker's name (BreakerConfig.Name: by default the
// relay's kind and its server's address, credentials left out). Two
// relays to the same server have the same default name, and a Metrics
// keeps one state per name, the last report winning: one relay's creation
// or Close reports its broker up and no destination full over the other's
// outage or full stream. Give such relays names apart. The methods are called with the relay's state locked, so that
// they report its changes in order: they must be fast, must not block and
// must be safe for concurrent use.
type Metrics interface {
	// BrokerUp reports whether the broker can be reached: true when the
	// relay is created, false when an outage begins, true again when it
	// ends, for every outage (the log counts incidents: one ERROR and one
	// "recovered" line for outages that follow each other within the
	// breaker's Settle), and true when the relay closes.
	BrokerUp(broker string, up bool)
	// FullDestinations reports how many of the broker's destinations
	// refuse messages for want of room (see [Full]), at every change.
	FullDestinations(broker string, n int)
}
