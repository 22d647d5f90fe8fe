package otel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/outbox-go/outbox/core"
)

// The names of the instruments. Those of the messaging conventions keep
// their names; the others are the outbox's own.
const (
	MetricSent        = "messaging.client.sent.messages" // counter: events published (error.type when Publish failed)
	MetricProcess     = "messaging.process.duration"     // histogram, s: how long the listeners of an attempt ran, not for unhandled (error.type when it failed)
	MetricDeliveries  = "outbox.deliveries"              // counter: delivery attempts by outcome (error.type when one failed)
	MetricLag         = "outbox.delivery.lag"            // histogram, s: commit to the start of an event's first delivery (not core.Delivery.Redelivered)
	MetricDoneBatch   = "outbox.done.batch.size"         // histogram: events per coalesced DONE write
	MetricDoneWrite   = "outbox.done.write.duration"     // histogram, s: one coalesced DONE write
	MetricClaimRows   = "outbox.claim.rows"              // histogram: rows per poller claim
	MetricClaimTime   = "outbox.claim.duration"          // histogram, s: one poller claim
	MetricEnqueued    = "outbox.enqueued"                // counter: events queued, by outbox.queue
	MetricHotDropped  = "outbox.hot.dropped"             // counter: hand-overs dropped (hot queue full, bytes budget, closing)
	MetricLeaseLost   = "outbox.lease.lost"              // counter: status writes fenced off
	MetricLeaseReaped = "outbox.lease.reaped"            // counter: expired leases released
	MetricDeadLetters = "outbox.dead_letters"            // counter: events that went DEAD
	MetricPutOffs     = "outbox.put_offs"                // counter: events put off, downstream unavailable
	MetricUnhandled   = "outbox.unhandled"               // counter: events that found no listener
	MetricReplayed    = "outbox.replayed"                // counter: DEAD events moved back to NEW
	MetricPurged      = "outbox.purged"                  // counter: rows purged, by outbox.status
	MetricQueueDepth  = "outbox.queue.depth"             // gauge: events queued in process, by outbox.queue
	MetricOldestAge   = "outbox.oldest_pending.age"      // gauge, s: age of the oldest pending event a poller saw (still ageing while the cold queue is full and the dispatcher holds that event; the store's first due event while the dispatcher holds events a claim left out)
	MetricBlockedKeys = "outbox.blocked_keys"            // gauge: ordering keys held by a DEAD event

	MetricInboxProcessed = "outbox.inbox.processed"        // counter: inbox messages processed, by outcome (error.type when one failed)
	MetricInboxProcess   = "outbox.inbox.process.duration" // histogram, s: how long an inbox's business function or handler ran, not for duplicate, unhandled and NotRun (error.type when it failed)
	MetricInboxLag       = "outbox.inbox.lag"              // histogram, s: a queued inbox message's wait, from Enqueue (its DueAt when later) to its first handling

	MetricRelayBrokerUp         = "outbox.relay.broker.up"         // gauge: 1 while a broker relay's broker can be reached, 0 during an outage, by outbox.relay.broker
	MetricRelayOutages          = "outbox.relay.outages"           // counter: outages of a broker relay's broker begun, by outbox.relay.broker
	MetricRelayFullDestinations = "outbox.relay.full_destinations" // gauge: a broker relay's destinations full (a stream or queue at its limit), by outbox.relay.broker
)

// instruments are created once, in New.
type instruments struct {
	sent, deliveries, inboxProcessed                            metric.Int64Counter
	process, lag, doneWrite, claimTime, inboxProcess, inboxLag  metric.Float64Histogram
	doneBatch, claimRows                                        metric.Int64Histogram
	enqueued, hotDropped, leaseLost, leaseReaped, dead, putOffs metric.Int64Counter
	unhandled, replayed, purged, relayOutages                   metric.Int64Counter
	queueDepth, blockedKeys, relayBrokerUp, relayFull           metric.Int64Gauge
	oldestAge                                                   metric.Float64Gauge
}

// durationBuckets span a fast local listener to a slow broker, in seconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// sizeBuckets suit batch sizes.
var sizeBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

func newInstruments(m metric.Meter) (*instruments, error) {
	var (
		in   instruments
		errs []error
	)
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	sizes := func(name, unit, desc string) metric.Int64Histogram {
		h, err := m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(sizeBuckets...))
		errs = append(errs, err)
		return h
	}
	in.sent = counter(MetricSent, "{message}", "Events published into the outbox.")
	in.deliveries = counter(MetricDeliveries, "{attempt}", "Delivery attempts, by outcome.")
	in.process = seconds(MetricProcess, "How long the listeners of a delivery attempt ran.")
	in.lag = seconds(MetricLag, "Time from an event's commit to the start of its first delivery attempt.")
	in.doneWrite = seconds(MetricDoneWrite, "Duration of one coalesced DONE write.")
	in.claimTime = seconds(MetricClaimTime, "Duration of one poller claim.")
	in.doneBatch = sizes(MetricDoneBatch, "{event}", "Events per coalesced DONE write.")
	in.claimRows = sizes(MetricClaimRows, "{event}", "Rows claimed per poller claim.")
	in.enqueued = counter(MetricEnqueued, "{event}", "Events queued for the dispatcher, by queue.")
	in.hotDropped = counter(MetricHotDropped, "{event}", "Hand-overs dropped: the hot queue was full, the events held reached the bytes budget (MaxHeldBytes), or the dispatcher was closing (the poller delivers them).")
	in.leaseLost = counter(MetricLeaseLost, "{event}", "Status writes fenced off: another node owns those events now.")
	in.leaseReaped = counter(MetricLeaseReaped, "{event}", "Expired leases released.")
	in.dead = counter(MetricDeadLetters, "{event}", "Events that went DEAD: their last attempt failed, no listener took them (UnhandledDead), or their stored row could not be read.")
	in.putOffs = counter(MetricPutOffs, "{event}", "Events put off because their downstream was unavailable.")
	in.unhandled = counter(MetricUnhandled, "{event}", "Events that found no listener.")
	in.replayed = counter(MetricReplayed, "{event}", "DEAD events moved back to NEW.")
	in.purged = counter(MetricPurged, "{event}", "Rows removed by a retention purge, by status.")
	in.inboxProcessed = counter(MetricInboxProcessed, "{message}", "Inbox messages processed, by outcome.")
	in.inboxProcess = seconds(MetricInboxProcess, "How long an inbox's business function or handler ran for one message.")
	in.inboxLag = seconds(MetricInboxLag, "Time from a queued inbox message's Enqueue to the start of its first handling.")
	in.relayOutages = counter(MetricRelayOutages, "{outage}", "Outages of a broker relay's broker begun, by broker.")
	var err error
	in.queueDepth, err = m.Int64Gauge(MetricQueueDepth, metric.WithUnit("{event}"), metric.WithDescription("Events queued in process, by queue."))
	errs = append(errs, err)
	in.blockedKeys, err = m.Int64Gauge(MetricBlockedKeys, metric.WithUnit("{key}"), metric.WithDescription("Ordering keys blocked by a DEAD event."))
	errs = append(errs, err)
	in.relayBrokerUp, err = m.Int64Gauge(MetricRelayBrokerUp, metric.WithUnit("{broker}"), metric.WithDescription("1 while a broker relay's broker can be reached, 0 during an outage, by broker."))
	errs = append(errs, err)
	in.relayFull, err = m.Int64Gauge(MetricRelayFullDestinations, metric.WithUnit("{destination}"), metric.WithDescription("Destinations of a broker relay (streams, queues) refusing messages for want of room, by broker."))
	errs = append(errs, err)
	in.oldestAge, err = m.Float64Gauge(MetricOldestAge, metric.WithUnit("s"), metric.WithDescription("Age of the oldest pending event a poller saw."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &in, nil
}

// setKind tells which attributes a setKey carries.
type setKind uint8

const (
	kindSent         setKind = iota // type, error.type
	kindLag                         // type, store, path
	kindOutcome                     // type, store, path, outcome
	kindStore                       // store, error.type
	kindInboxLag                    // topic, store (when set), inbox mode
	kindInboxOutcome                // topic, store (when set), inbox mode, inbox outcome
)

// setKey identifies one attribute set; sets are built once and reused.
type setKey struct {
	kind         setKind
	typ          string // the event type, or the inbox topic
	store        string
	path         core.Path
	outcome      core.Outcome
	errType      string
	mode         core.InboxMode // of an inbox
	inboxOutcome core.InboxOutcome
}

// measureSet is one attribute set as the options of Add and Record,
// built once: options passed one by one would be collected into a new
// slice by every measurement.
type measureSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMeasureSet(kv ...attribute.KeyValue) *measureSet {
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &measureSet{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
}

// set returns k's attribute set, built on its first use.
func (o *Observer) set(k setKey) *measureSet {
	return cached(&o.sets, k, func() *measureSet { return o.newSet(k) })
}

// newSet builds k's attribute set.
func (o *Observer) newSet(k setKey) *measureSet {
	attrs := []attribute.KeyValue{systemAttr}
	switch k.kind {
	case kindSent:
		attrs = append(attrs, semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend, semconv.MessagingDestinationName(k.typ))
	case kindLag, kindOutcome:
		attrs = append(attrs, semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess, semconv.MessagingDestinationName(k.typ),
			AttrStore.String(k.store), AttrPath.String(k.path.String()))
		if k.kind == kindOutcome {
			attrs = append(attrs, AttrOutcome.String(k.outcome.String()))
		}
	case kindStore:
		attrs = append(attrs, AttrStore.String(k.store))
	case kindInboxLag, kindInboxOutcome:
		attrs = append(attrs, semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess, AttrInboxMode.String(k.mode.String()))
		if k.typ != "" {
			attrs = append(attrs, semconv.MessagingDestinationName(k.typ))
		}
		if k.store != "" {
			attrs = append(attrs, AttrStore.String(k.store))
		}
		if k.kind == kindInboxOutcome {
			attrs = append(attrs, AttrOutcome.String(k.inboxOutcome.String()))
		}
	}
	if k.errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(k.errType))
	}
	return newMeasureSet(attrs...)
}

// storeMetrics is the core.Metrics of one store: every signal carries its
// outbox.store label.
type storeMetrics struct {
	in                    *instruments
	store                 *measureSet
	hot, cold, done, dead *measureSet
}

func (o *Observer) newStoreMetrics(store string) *storeMetrics {
	st := AttrStore.String(store)
	with := func(kv ...attribute.KeyValue) *measureSet {
		return newMeasureSet(append([]attribute.KeyValue{systemAttr, st}, kv...)...)
	}
	return &storeMetrics{
		in:    o.inst,
		store: with(),
		hot:   with(AttrQueue.String("hot")),
		cold:  with(AttrQueue.String("cold")),
		done:  with(AttrStatus.String("done")),
		dead:  with(AttrStatus.String("dead")),
	}
}

// ForStore returns the metrics of one store of a set of databases
// (package tenant): the same instruments, labelled outbox.store = id.
func (o *Observer) ForStore(id string) core.Metrics {
	if id == "" {
		return o.storeMetrics
	}
	return cached(&o.stores, id, func() *storeMetrics { return o.newStoreMetrics(id) })
}

var bg = context.Background()

// HotEnqueued counts an event queued on the hot path (outbox.enqueued, outbox.queue=hot).
func (m *storeMetrics) HotEnqueued() { m.in.enqueued.Add(bg, 1, m.hot.add...) }

// ColdEnqueued counts an event a poller queued (outbox.enqueued, outbox.queue=cold).
func (m *storeMetrics) ColdEnqueued() { m.in.enqueued.Add(bg, 1, m.cold.add...) }

// HotDropped counts a hand-over dropped: the hot queue was full, the
// events held reached the bytes budget (dispatcher.Config.MaxHeldBytes),
// or the dispatcher was closing; the poller delivers it.
func (m *storeMetrics) HotDropped() { m.in.hotDropped.Add(bg, 1, m.store.add...) }

// DispatchSuccess does nothing: outbox.deliveries, recorded by the
// Observer's Deliver, counts successes with more labels.
func (m *storeMetrics) DispatchSuccess() {}

// DispatchFailure does nothing: outbox.deliveries counts failures.
func (m *storeMetrics) DispatchFailure() {}

// DispatchDead counts an event that went DEAD (outbox.dead_letters).
func (m *storeMetrics) DispatchDead() { m.in.dead.Add(bg, 1, m.store.add...) }

// QueueDepths records the dispatcher's queue lengths (outbox.queue.depth).
func (m *storeMetrics) QueueDepths(hot, cold int) {
	m.in.queueDepth.Record(bg, int64(hot), m.hot.rec...)
	m.in.queueDepth.Record(bg, int64(cold), m.cold.rec...)
}

// OldestLag records the age of the oldest pending event a poller saw
// (outbox.oldest_pending.age).
func (m *storeMetrics) OldestLag(lag time.Duration) {
	m.in.oldestAge.Record(bg, lag.Seconds(), m.store.rec...)
}

// LeaseLost counts n status writes fenced off (outbox.lease.lost).
func (m *storeMetrics) LeaseLost(n int) { m.in.leaseLost.Add(bg, int64(n), m.store.add...) }

// LeasesReaped counts n expired leases released (outbox.lease.reaped).
func (m *storeMetrics) LeasesReaped(n int) { m.in.leaseReaped.Add(bg, int64(n), m.store.add...) }

// Replayed counts n DEAD events moved back to NEW (outbox.replayed).
func (m *storeMetrics) Replayed(n int) { m.in.replayed.Add(bg, int64(n), m.store.add...) }

// Purged counts rows removed by a retention purge (outbox.purged, by outbox.status).
func (m *storeMetrics) Purged(done, dead int) {
	m.in.purged.Add(bg, int64(done), m.done.add...)
	m.in.purged.Add(bg, int64(dead), m.dead.add...)
}

// Unhandled counts an event of eventType that found no listener
// (outbox.unhandled, labelled with the type).
func (m *storeMetrics) Unhandled(eventType string) {
	m.in.unhandled.Add(bg, 1, m.store.add[0], metric.WithAttributes(semconv.MessagingDestinationName(eventType)))
}

// BlockedKeys records the ordering keys held by a DEAD event (outbox.blocked_keys).
func (m *storeMetrics) BlockedKeys(n int) { m.in.blockedKeys.Record(bg, int64(n), m.store.rec...) }

// Postponed counts an event put off, its downstream unavailable (outbox.put_offs).
func (m *storeMetrics) Postponed() { m.in.putOffs.Add(bg, 1, m.store.add...) }
