package prometheus

import (
	"fmt"
	"net/http"
	"sync"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay"
)

// Collector turns the outbox's signals into Prometheus metrics. It is a
// core.Observer (for the labelled delivery metrics: event type, path,
// outcome, latencies) and a core.Metrics with every optional interface and
// core.StoreMetrics (for queues, lag, leases, DEAD, put-offs and the
// operations, labelled by store): give the same value to
// outbox.Config.Metrics and outbox.Config.Observer (or the tenant.Config
// fields of the same names). It is also a core.InboxObserver (for the
// inbox's processings by topic, mode and outcome): give it to
// inbox.Config.Observer and inbox.DispatcherConfig.Observer as well to
// measure an inbox. It is a relay.Metrics too (whether a broker relay's
// broker can be reached, its outages and full destinations): give it to
// a natsjs or rabbitmq relay's Config.Metrics. The metrics are listed in
// the package documentation.
//
// A Collector is also a prometheus.Collector, so it can be registered in
// further registries. Create it with [New] (a zero Collector is not
// usable). All its methods are safe for concurrent use and never block.
type Collector struct {
	core.NopObserver // methods added to core.Observer later observe nothing

	registry *prom.Registry
	types    *typeLabels
	topics   *topicLabels
	root     *storeView
	stores   sync.Map   // store id → *storeView
	storesMu sync.Mutex // creating a store's view or inbox view, and ForgetStore

	rootInbox *inboxView
	inboxes   sync.Map // inbox store id → *inboxView

	commitToListener *prom.HistogramVec // store, path
	listener         *prom.HistogramVec // store, event_type
	doneBatch        *prom.HistogramVec // store
	doneWrite        *prom.HistogramVec // store
	claim            *prom.HistogramVec // store

	deliveries    *prom.CounterVec // store, event_type, path, outcome
	published     *prom.CounterVec // event_type
	publishErrors *prom.CounterVec // event_type
	doneErrors    *prom.CounterVec // store
	claimed       *prom.CounterVec // store
	claimErrors   *prom.CounterVec // store
	enqueued      *prom.CounterVec // store, queue
	hotDropped    *prom.CounterVec // store
	leaseLost     *prom.CounterVec // store
	leasesReaped  *prom.CounterVec // store
	dead          *prom.CounterVec // store
	putOff        *prom.CounterVec // store
	unhandled     *prom.CounterVec // store, event_type
	replayed      *prom.CounterVec // store
	purged        *prom.CounterVec // store, status

	queueDepth    *prom.GaugeVec // queue
	oldestPending *prom.GaugeVec // store
	blockedKeys   *prom.GaugeVec // store

	inboxProcessed *prom.CounterVec   // store, topic, mode, outcome
	inboxDuration  *prom.HistogramVec // store, topic, mode
	inboxWait      *prom.HistogramVec // store, topic

	relayBrokerUp *prom.GaugeVec   // broker
	relayOutages  *prom.CounterVec // broker
	relayFull     *prom.GaugeVec   // broker
	relays        relayStates

	all []prom.Collector
}

var (
	_ core.Observer         = (*Collector)(nil)
	_ core.Metrics          = (*Collector)(nil)
	_ core.OpsMetrics       = (*Collector)(nil)
	_ core.UnhandledMetrics = (*Collector)(nil)
	_ core.OrderMetrics     = (*Collector)(nil)
	_ core.PostponeMetrics  = (*Collector)(nil)
	_ core.StoreMetrics     = (*Collector)(nil)
	_ core.InboxObserver    = (*Collector)(nil)
	_ relay.Metrics         = (*Collector)(nil)
	_ prom.Collector        = (*Collector)(nil)
)

// New returns a Collector with its metrics registered in a registry of its
// own and, when set, in cfg.Registerer. An invalid cfg returns every
// problem at once, each a *core.ConfigError wrapping core.ErrInvalidConfig,
// joined with errors.Join; a refused registration in cfg.Registerer (such
// as a second collector of the same Namespace and ConstLabels) returns the
// registry's error (prometheus.AlreadyRegisteredError for an identical
// collector).
func New(cfg Config) (*Collector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Collector{registry: prom.NewRegistry()}
	f := factory{c: c, cfg: cfg}

	c.commitToListener = f.histogram("commit_to_listener_seconds",
		"Seconds from an event's commit to the start of its first delivery attempt's listeners, by store and path (hot, cold, retry).",
		cfg.Buckets.CommitToListener, labelStore, labelPath)
	c.listener = f.histogram("listener_duration_seconds",
		"Seconds the listeners of one delivery attempt ran, by store and event type.",
		cfg.Buckets.ListenerDuration, labelStore, labelEventType)
	c.doneBatch = f.histogram("done_batch_size",
		"Events per coalesced DONE write, by store.",
		cfg.Buckets.DoneBatchSize, labelStore)
	c.doneWrite = f.histogram("done_write_seconds",
		"Seconds one coalesced DONE write took, by store.",
		cfg.Buckets.DoneWrite, labelStore)
	c.claim = f.histogram("claim_seconds",
		"Seconds one claim of the poller took, by store.",
		cfg.Buckets.Claim, labelStore)

	c.deliveries = f.counter("deliveries_total",
		"Delivery attempts by store, event type, path (hot, cold, retry) and outcome (done, retry, dead, put_off, unhandled, interrupted).",
		labelStore, labelEventType, labelPath, labelOutcome)
	c.published = f.counter("published_total",
		"Events inserted by Publish, by event type (counted at the insert: a transaction rolled back later is not subtracted).",
		labelEventType)
	c.publishErrors = f.counter("publish_errors_total",
		"Publish calls that failed, by event type.", labelEventType)
	c.doneErrors = f.counter("done_write_errors_total",
		"Coalesced DONE writes that failed, by store (their events are delivered again by the poller).", labelStore)
	c.claimed = f.counter("claimed_total",
		"Events claimed by the poller, by store.", labelStore)
	c.claimErrors = f.counter("claim_errors_total",
		"Claims of the poller that failed, by store.", labelStore)
	c.enqueued = f.counter("enqueued_total",
		"Events queued for the dispatcher's workers, by store and queue (hot: after commit, cold: by the poller).",
		labelStore, labelQueue)
	c.hotDropped = f.counter("hot_dropped_total",
		"Events the hot queue could not take (full, or over the held-bytes budget); the poller delivers them, by store.", labelStore)
	c.leaseLost = f.counter("lease_lost_total",
		"Status writes fenced off because another node (or, with InFlightTTL, a newer run of this node) owns the event now, by store.", labelStore)
	c.leasesReaped = f.counter("leases_reaped_total",
		"Expired leases released by the poller, by store.", labelStore)
	c.dead = f.counter("dead_total",
		"Events marked DEAD (last attempt failed, undecodable, or unhandled under the dead policy), by store.", labelStore)
	c.putOff = f.counter("put_off_total",
		"Events put off without charging an attempt because their listener's downstream was unavailable, by store.", labelStore)
	c.unhandled = f.counter("unhandled_total",
		"Events for which no listener was registered, by store and event type.", labelStore, labelEventType)
	c.replayed = f.counter("replayed_total",
		"DEAD events moved back to NEW by a replay, by store.", labelStore)
	c.purged = f.counter("purged_total",
		"Rows removed by a retention purge, by store and status (done, dead).", labelStore, labelStatus)

	c.queueDepth = f.gauge("queue_depth",
		"Events waiting in the dispatcher's queues, by queue (hot, cold).", labelQueue)
	c.oldestPending = f.gauge("oldest_pending_seconds",
		"Age of the oldest NEW or RETRY event the poller saw due, by store (0 when none); while the cold queue is full, the age the oldest one its last claim found has reached while the dispatcher holds it.", labelStore)
	c.blockedKeys = f.gauge("blocked_keys",
		"Ordering keys held by a DEAD event under the block policy, by store.", labelStore)

	c.inboxProcessed = f.counter("inbox_processed_total",
		"Inbox messages processed, by store, topic, mode (transactional, queued) and outcome (processed, duplicate, failed, retry, dead, unhandled, interrupted).",
		labelStore, labelTopic, labelMode, labelOutcome)
	c.inboxDuration = f.histogram("inbox_process_duration_seconds",
		"Seconds the business function or handler of one inbox message ran, by store, topic and mode.",
		cfg.Buckets.ListenerDuration, labelStore, labelTopic, labelMode)
	c.inboxWait = f.histogram("inbox_enqueue_to_handler_seconds",
		"Seconds from a queued inbox message's Enqueue (its DueAt when later) to the start of its first handling, by store and topic.",
		cfg.Buckets.CommitToListener, labelStore, labelTopic)

	c.relayBrokerUp = f.gauge("relay_broker_up",
		"1 while a broker relay's broker can be reached, 0 from the publish that could not reach it (an outage begins) to the first one it answers, by broker.",
		labelBroker)
	c.relayOutages = f.counter("relay_outages_total",
		"Outages of a broker relay's broker begun, one per incident however many publishes fail in it, by broker.",
		labelBroker)
	c.relayFull = f.gauge("relay_full_destinations",
		"Destinations of a broker relay (streams, queues) refusing messages for want of room while the broker is up, by broker.",
		labelBroker)
	c.relays.max = cfg.MaxBrokers

	c.types = newTypeLabels(cfg.MaxEventTypes, c.published, c.publishErrors)
	c.topics = newTopicLabels(cfg.MaxEventTypes)
	c.root = c.newStoreView("")
	c.rootInbox = &inboxView{c: c, store: validLabel("")}

	if err := c.registry.Register(c); err != nil {
		return nil, fmt.Errorf("outbox prometheus: register in the collector's registry: %w", err)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("outbox prometheus: register in Config.Registerer: %w", err)
		}
	}
	return c, nil
}

// factory builds the vectors of a Collector and remembers them for
// Describe and Collect.
type factory struct {
	c   *Collector
	cfg Config
}

func (f factory) opts(name, help string) prom.Opts {
	return prom.Opts{Namespace: f.cfg.Namespace, Name: name, Help: help, ConstLabels: f.cfg.ConstLabels}
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prom.HistogramVec {
	o := f.opts(name, help)
	v := prom.NewHistogramVec(prom.HistogramOpts{Namespace: o.Namespace, Name: o.Name, Help: o.Help,
		ConstLabels: o.ConstLabels, Buckets: buckets}, labels)
	f.c.all = append(f.c.all, v)
	return v
}

func (f factory) counter(name, help string, labels ...string) *prom.CounterVec {
	v := prom.NewCounterVec(prom.CounterOpts(f.opts(name, help)), labels)
	f.c.all = append(f.c.all, v)
	return v
}

func (f factory) gauge(name, help string, labels ...string) *prom.GaugeVec {
	v := prom.NewGaugeVec(prom.GaugeOpts(f.opts(name, help)), labels)
	f.c.all = append(f.c.all, v)
	return v
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prom.Desc) {
	for _, v := range c.all {
		v.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prom.Metric) {
	for _, v := range c.all {
		v.Collect(ch)
	}
}

// Gatherer returns the collector's own registry, which holds its metrics
// and nothing else, for promhttp.HandlerFor or a push.
func (c *Collector) Gatherer() prom.Gatherer { return c.registry }

// Handler returns an http.Handler that serves the collector's metrics in
// the Prometheus exposition formats: mount it on "/metrics". To serve them
// with the rest of the process's metrics instead, set Config.Registerer
// and serve that registry with promhttp.
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.registry, promhttp.HandlerOpts{})
}

// ForStore implements core.StoreMetrics: the signals of the store (a
// database of a tenant set) storeID get the label store="<storeID>". The
// signals of an outbox's own database come to the Collector itself, with
// store="".
func (c *Collector) ForStore(storeID string) core.Metrics { return c.view(storeID) }

// view returns the series of the store storeID.
func (c *Collector) view(storeID string) *storeView {
	if storeID == "" {
		return c.root
	}
	if v, ok := c.stores.Load(storeID); ok {
		return v.(*storeView)
	}
	// Created under storesMu: a ForgetStore running now would delete the
	// series of a view created after it removed the store's view.
	c.storesMu.Lock()
	defer c.storesMu.Unlock()
	if v, ok := c.stores.Load(storeID); ok {
		return v.(*storeView)
	}
	v := c.newStoreView(storeID)
	c.stores.Store(storeID, v)
	return v
}

// inboxView returns the inbox series of the store storeID (an inbox of a
// dispatcher of several; "" for the others).
func (c *Collector) inboxView(storeID string) *inboxView {
	if storeID == "" {
		return c.rootInbox
	}
	if v, ok := c.inboxes.Load(storeID); ok {
		return v.(*inboxView)
	}
	c.storesMu.Lock() // as in view
	defer c.storesMu.Unlock()
	if v, ok := c.inboxes.Load(storeID); ok {
		return v.(*inboxView)
	}
	v := &inboxView{c: c, id: storeID, store: validLabel(storeID)}
	c.inboxes.Store(storeID, v)
	return v
}

// ForgetStore deletes every series labelled store="<storeID>", such as
// when the store was removed from a tenant set (or an inbox of that id
// from a dispatcher), so that its gauges do not keep reporting their last
// value. Signals that come for the store later create its series again,
// also through a core.Metrics ForStore returned before (as the dispatcher
// and the poller hold theirs). The series of an outbox's own database
// (store="") are never forgotten: ForgetStore("") does nothing.
func (c *Collector) ForgetStore(storeID string) {
	if storeID == "" {
		return
	}
	c.storesMu.Lock()
	defer c.storesMu.Unlock()
	if v, ok := c.stores.LoadAndDelete(storeID); ok {
		v.(*storeView).forgotten.Store(true)
	}
	if v, ok := c.inboxes.LoadAndDelete(storeID); ok {
		v.(*inboxView).forgotten.Store(true)
	}
	match := prom.Labels{labelStore: storeID}
	for _, v := range c.all {
		if dv, ok := v.(interface{ DeletePartialMatch(prom.Labels) int }); ok {
			dv.DeletePartialMatch(match)
		}
	}
}
