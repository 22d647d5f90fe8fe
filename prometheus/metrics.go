package prometheus

import (
	"sync"
	"sync/atomic"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-go/outbox/core"
)

// storeView is the core.Metrics of one store: the Collector's signals with
// the store label resolved once.
type storeView struct {
	c     *Collector
	id    string // the store id, as given to ForStore
	store string // its label value

	// forgotten is set by ForgetStore, which deleted the series below: a
	// signal then goes to the store's current view (see live).
	forgotten atomic.Bool

	hotEnqueued, coldEnqueued prom.Counter
	hotDropped                prom.Counter
	leaseLost, leasesReaped   prom.Counter
	dead, putOff, replayed    prom.Counter
	purgedDone, purgedDead    prom.Counter
	oldestPending             prom.Gauge
	blockedKeys               prom.Gauge

	// The Observer's per-store series.
	commitToListener     [3]prom.Observer // by core.Path
	doneBatch, doneWrite prom.Observer
	doneErrors           prom.Counter
	claim                prom.Observer
	claimed, claimErrors prom.Counter

	// The Observer's series by event type, resolved on first use:
	// deliveries by deliveryKey (see delivered), listeners by event_type
	// label.
	deliveries sync.Map // deliveryKey → prom.Counter
	listeners  sync.Map // event_type label → prom.Observer
}

// inboxView is the InboxObserver's series of one store, apart from its
// outbox series (storeView): the id of an inbox of a dispatcher of
// several creates inbox series only. They are created on first use.
type inboxView struct {
	c      *Collector
	id     string      // the store's id
	store  string      // the store's label value
	series [2]sync.Map // by core.InboxMode: topic label → *inboxSeries
	// forgotten: ForgetStore deleted the view's series; a processing
	// that began before counts on the store's current view.
	forgotten atomic.Bool
}

var (
	_ core.Metrics          = (*storeView)(nil)
	_ core.OpsMetrics       = (*storeView)(nil)
	_ core.UnhandledMetrics = (*storeView)(nil)
	_ core.OrderMetrics     = (*storeView)(nil)
	_ core.PostponeMetrics  = (*storeView)(nil)
)

// newStoreView resolves the store's series. They exist from then on, at 0
// until a signal comes: rate() and increase() see the first increment of a
// counter only when the series existed before it.
func (c *Collector) newStoreView(id string) *storeView {
	store := validLabel(id)
	v := &storeView{
		c: c, id: id, store: store,
		hotEnqueued:   c.enqueued.WithLabelValues(store, "hot"),
		coldEnqueued:  c.enqueued.WithLabelValues(store, "cold"),
		hotDropped:    c.hotDropped.WithLabelValues(store),
		leaseLost:     c.leaseLost.WithLabelValues(store),
		leasesReaped:  c.leasesReaped.WithLabelValues(store),
		dead:          c.dead.WithLabelValues(store),
		putOff:        c.putOff.WithLabelValues(store),
		replayed:      c.replayed.WithLabelValues(store),
		purgedDone:    c.purged.WithLabelValues(store, "done"),
		purgedDead:    c.purged.WithLabelValues(store, "dead"),
		oldestPending: c.oldestPending.WithLabelValues(store),
		blockedKeys:   c.blockedKeys.WithLabelValues(store),
		doneBatch:     c.doneBatch.WithLabelValues(store),
		doneWrite:     c.doneWrite.WithLabelValues(store),
		doneErrors:    c.doneErrors.WithLabelValues(store),
		claim:         c.claim.WithLabelValues(store),
		claimed:       c.claimed.WithLabelValues(store),
		claimErrors:   c.claimErrors.WithLabelValues(store),
	}
	for _, p := range []core.Path{core.PathHot, core.PathCold, core.PathRetry} {
		v.commitToListener[p] = c.commitToListener.WithLabelValues(store, p.String())
	}
	return v
}

// live returns the view a signal of v counts on: v itself, or once
// ForgetStore deleted v's series, the store's current view, which creates
// them again. A core.Metrics that ForStore returned before ForgetStore is
// such a v; it costs one atomic load while its store is not forgotten.
func (v *storeView) live() *storeView {
	if !v.forgotten.Load() {
		return v
	}
	return v.c.view(v.id)
}

// HotEnqueued counts outbox_enqueued_total{queue="hot"}.
func (v *storeView) HotEnqueued() { v.live().hotEnqueued.Inc() }

// ColdEnqueued counts outbox_enqueued_total{queue="cold"}.
func (v *storeView) ColdEnqueued() { v.live().coldEnqueued.Inc() }

// HotDropped counts outbox_hot_dropped_total.
func (v *storeView) HotDropped() { v.live().hotDropped.Inc() }

// DispatchSuccess does nothing: the Observer side counts every delivery
// attempt, with its event type and path, in outbox_deliveries_total.
func (v *storeView) DispatchSuccess() {}

// DispatchFailure does nothing: see DispatchSuccess.
func (v *storeView) DispatchFailure() {}

// DispatchDead counts outbox_dead_total.
func (v *storeView) DispatchDead() { v.live().dead.Inc() }

// QueueDepths sets outbox_queue_depth: the queues are shared by every
// store.
func (v *storeView) QueueDepths(hot, cold int) {
	v.c.queueDepth.WithLabelValues("hot").Set(float64(hot))
	v.c.queueDepth.WithLabelValues("cold").Set(float64(cold))
}

// OldestLag sets outbox_oldest_pending_seconds.
func (v *storeView) OldestLag(lag time.Duration) { v.live().oldestPending.Set(max(0, lag.Seconds())) }

// LeaseLost counts outbox_lease_lost_total.
func (v *storeView) LeaseLost(n int) { addInt(v.live().leaseLost, n) }

// LeasesReaped counts outbox_leases_reaped_total.
func (v *storeView) LeasesReaped(n int) { addInt(v.live().leasesReaped, n) }

// Replayed counts outbox_replayed_total.
func (v *storeView) Replayed(n int) { addInt(v.live().replayed, n) }

// Purged counts outbox_purged_total{status="done"|"dead"}.
func (v *storeView) Purged(done, dead int) {
	v = v.live()
	addInt(v.purgedDone, done)
	addInt(v.purgedDead, dead)
}

// Unhandled counts outbox_unhandled_total{event_type}.
func (v *storeView) Unhandled(eventType string) {
	v.c.unhandled.WithLabelValues(v.store, v.c.types.entry(eventType).label).Inc()
}

// BlockedKeys sets outbox_blocked_keys.
func (v *storeView) BlockedKeys(n int) { v.live().blockedKeys.Set(float64(max(0, n))) }

// Postponed counts outbox_put_off_total.
func (v *storeView) Postponed() { v.live().putOff.Inc() }

// addInt adds n to c when positive: a counter never goes down.
func addInt(c prom.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// The Collector's own core.Metrics methods are those of store "": an
// outbox's own database.

// HotEnqueued implements core.Metrics: outbox_enqueued_total{queue="hot"}.
func (c *Collector) HotEnqueued() { c.root.HotEnqueued() }

// ColdEnqueued implements core.Metrics: outbox_enqueued_total{queue="cold"}.
func (c *Collector) ColdEnqueued() { c.root.ColdEnqueued() }

// HotDropped implements core.Metrics: outbox_hot_dropped_total.
func (c *Collector) HotDropped() { c.root.HotDropped() }

// DispatchSuccess implements core.Metrics. It does nothing: the Collector
// counts every delivery attempt as a core.Observer, with its event type,
// path and outcome, in outbox_deliveries_total. Set it as
// outbox.Config.Observer too.
func (c *Collector) DispatchSuccess() {}

// DispatchFailure implements core.Metrics. It does nothing: see
// DispatchSuccess.
func (c *Collector) DispatchFailure() {}

// DispatchDead implements core.Metrics: outbox_dead_total, which counts
// every event marked DEAD, including undecodable rows and, under
// dispatcher.UnhandledDead, events without a listener.
func (c *Collector) DispatchDead() { c.root.DispatchDead() }

// QueueDepths implements core.Metrics: outbox_queue_depth{queue}.
func (c *Collector) QueueDepths(hot, cold int) { c.root.QueueDepths(hot, cold) }

// OldestLag implements core.Metrics: outbox_oldest_pending_seconds.
func (c *Collector) OldestLag(lag time.Duration) { c.root.OldestLag(lag) }

// LeaseLost implements core.Metrics: outbox_lease_lost_total.
func (c *Collector) LeaseLost(n int) { c.root.LeaseLost(n) }

// LeasesReaped implements core.Metrics: outbox_leases_reaped_total.
func (c *Collector) LeasesReaped(n int) { c.root.LeasesReaped(n) }

// Replayed implements core.OpsMetrics: outbox_replayed_total.
func (c *Collector) Replayed(n int) { c.root.Replayed(n) }

// Purged implements core.OpsMetrics: outbox_purged_total{status}.
func (c *Collector) Purged(done, dead int) { c.root.Purged(done, dead) }

// Unhandled implements core.UnhandledMetrics:
// outbox_unhandled_total{event_type}.
func (c *Collector) Unhandled(eventType string) { c.root.Unhandled(eventType) }

// BlockedKeys implements core.OrderMetrics: outbox_blocked_keys.
func (c *Collector) BlockedKeys(n int) { c.root.BlockedKeys(n) }

// Postponed implements core.PostponeMetrics: outbox_put_off_total.
func (c *Collector) Postponed() { c.root.Postponed() }
