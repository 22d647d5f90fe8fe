package prometheus

import (
	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-go/outbox/core"
)

// deliveryKey names a child of outbox_deliveries_total within a store.
type deliveryKey struct {
	typ     string // the event_type label
	path    core.Path
	outcome core.Outcome
}

// listenerOutcomes are the outcomes of an attempt whose listeners ran to
// an end: a type and path that has one has all three series.
var listenerOutcomes = [...]core.Outcome{core.OutcomeDone, core.OutcomeRetry, core.OutcomeDead}

// delivered returns the store's outbox_deliveries_total child of k,
// resolved once. The first done, retry or dead attempt of an event type on
// a path creates the three series at once, at 0 until counted: rate() and
// increase() see a counter's first increment only when its series existed
// before, so that the first retry or DEAD attempt of a type delivered
// before shows on "Failures by event type". The other outcomes (put_off,
// unhandled, interrupted) get their series on first use, so that a type
// nobody listens to has no done series at 0.
func (v *storeView) delivered(k deliveryKey) prom.Counter {
	if c, ok := v.deliveries.Load(k); ok {
		return c.(prom.Counter)
	}
	outcomes := []core.Outcome{k.outcome}
	if k.outcome <= core.OutcomeDead {
		outcomes = listenerOutcomes[:]
	}
	var c prom.Counter
	for _, o := range outcomes {
		sk := deliveryKey{typ: k.typ, path: k.path, outcome: o}
		got, _ := v.deliveries.LoadOrStore(sk, v.c.deliveries.WithLabelValues(v.store, k.typ, k.path.String(), o.String()))
		if o == k.outcome {
			c = got.(prom.Counter)
		}
	}
	return c
}

// listenerSeconds returns the store's outbox_listener_duration_seconds
// child of the event_type label typ, resolved once.
func (v *storeView) listenerSeconds(typ string) prom.Observer {
	if o, ok := v.listeners.Load(typ); ok {
		return o.(prom.Observer)
	}
	o, _ := v.listeners.LoadOrStore(typ, v.c.listener.WithLabelValues(v.store, typ))
	return o.(prom.Observer)
}
