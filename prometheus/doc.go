// Package prometheus exports the outbox's metrics to Prometheus.
//
// A [Collector] is both the outbox's core.Observer and its core.Metrics:
// give the same value to both fields and serve its [Collector.Handler].
//
//	col, err := outboxprom.New(outboxprom.Config{})
//	ob, err := outbox.New(ctx, db, outbox.Config{Metrics: col, Observer: col})
//	http.Handle("/metrics", col.Handler())
//
// (importing this package as outboxprom, beside the client library's
// prometheus package). The Observer side counts each delivery attempt
// with its event type, path and outcome and measures the latencies; the
// Metrics side reports queues, lag, leases, DEAD events, put-offs and the
// operations. A Collector given only as Metrics lacks
// outbox_deliveries_total and the histograms: set both.
//
// A Collector is also a core.InboxObserver: give it to an inbox too to
// count its messages by topic, mode and outcome.
//
//	in, err := inbox.New(ctx, db, inbox.Config{Observer: col})
//	d, err := in.NewDispatcher(inbox.DispatcherConfig{}) // inherits Observer
//
// And it is a relay.Metrics: give it to a broker relay to see whether its
// broker can be reached, its outages and its full destinations (streams;
// for RabbitMQ, exchange and routing key pairs).
//
//	r, err := natsjs.New(js, natsjs.Config{Metrics: col}) // or rabbitmq.Config{Metrics: col}
//
// The metrics live in a registry of the Collector's own, which
// [Collector.Handler] and [Collector.Gatherer] serve; set
// Config.Registerer (prometheus.DefaultRegisterer, say) to register them
// where the rest of the process's metrics are as well. The directories
// dashboards/ (a Grafana dashboard) and alerts/ (Prometheus alert rules)
// of this module use the names below with the default namespace.
//
// # Metrics
//
// Every name starts with Config.Namespace ("outbox") and "_". Labels:
// store is "" for an outbox's own database and the database's id in a
// tenant set (core.StoreMetrics); event_type is the event's type, bounded
// by Config.MaxEventTypes; path is hot (handed over after commit), cold
// (claimed by the poller) or retry (an in-process retry); outcome is done,
// retry, dead, put_off, unhandled or interrupted (core.Outcome) for the
// outbox's deliveries. For an inbox's messages (core.InboxObserver):
// store is "" for a dispatcher's own inbox and for the transactional mode
// of a lone inbox, the id given to AddInbox in a dispatcher of several and
// the database's id in a tenant set, in either mode (either creates the
// inbox metrics' series only, none of the outbox's); topic is the
// message's topic ("" when a transactional caller gave none), bounded by
// Config.MaxEventTypes apart from event types; mode is transactional
// (ProcessTx, Process) or queued (a dispatcher's handler); outcome is
// processed, duplicate, failed, retry, dead, unhandled or interrupted
// (core.InboxOutcome). For a relay's own state (relay.Metrics): broker is
// the relay's breaker name, its kind and server address without
// credentials ("nats jetstream nats://127.0.0.1:4222"), bounded by
// Config.MaxBrokers.
//
//	Name                                     Type       Labels                            Source
//	outbox_deliveries_total                  counter    store, event_type, path, outcome  Observer.Deliver: one per delivery attempt
//	outbox_commit_to_listener_seconds        histogram  store, path                       Observer.Deliver: commit to the listeners' start, first deliveries
//	outbox_listener_duration_seconds         histogram  store, event_type                 Observer.Deliver: how long the listeners ran (not for unhandled)
//	outbox_published_total                   counter    event_type                        Observer.Publish: events inserted (a later rollback is not subtracted)
//	outbox_publish_errors_total              counter    event_type                        Observer.Publish: Publish calls that failed
//	outbox_done_batch_size                   histogram  store                             Observer.DoneWritten: events per coalesced DONE write
//	outbox_done_write_seconds                histogram  store                             Observer.DoneWritten: time of one DONE write
//	outbox_done_write_errors_total           counter    store                             Observer.DoneWritten: failed DONE writes
//	outbox_claim_seconds                     histogram  store                             Observer.Claimed: time of one claim of the poller
//	outbox_claimed_total                     counter    store                             Observer.Claimed: rows claimed
//	outbox_claim_errors_total                counter    store                             Observer.Claimed: failed claims
//	outbox_enqueued_total                    counter    store, queue (hot, cold)          Metrics.HotEnqueued, ColdEnqueued
//	outbox_hot_dropped_total                 counter    store                             Metrics.HotDropped: left to the poller (queue full, bytes budget)
//	outbox_lease_lost_total                  counter    store                             Metrics.LeaseLost: status writes fenced off (another node, or a newer run here, owns the event)
//	outbox_leases_reaped_total               counter    store                             Metrics.LeasesReaped: expired leases released
//	outbox_dead_total                        counter    store                             Metrics.DispatchDead: events marked DEAD (any cause)
//	outbox_put_off_total                     counter    store                             PostponeMetrics.Postponed: downstream unavailable
//	outbox_unhandled_total                   counter    store, event_type                 UnhandledMetrics.Unhandled: no listener registered
//	outbox_replayed_total                    counter    store                             OpsMetrics.Replayed: DEAD events moved back to NEW
//	outbox_purged_total                      counter    store, status (done, dead)        OpsMetrics.Purged: rows removed by a retention purge
//	outbox_queue_depth                       gauge      queue (hot, cold)                 Metrics.QueueDepths: shared by every store
//	outbox_oldest_pending_seconds            gauge      store                             Metrics.OldestLag: age of the oldest due NEW/RETRY event (see below)
//	outbox_blocked_keys                      gauge      store                             OrderMetrics.BlockedKeys: ordering keys held by a DEAD event
//	outbox_inbox_processed_total             counter    store, topic, mode, outcome       InboxObserver.ProcessInbox: one per processing of an inbox message
//	outbox_inbox_process_duration_seconds    histogram  store, topic, mode                InboxObserver.ProcessInbox: how long the business function or handler ran (not for duplicate, unhandled, NotRun)
//	outbox_inbox_enqueue_to_handler_seconds  histogram  store, topic                      InboxObserver.ProcessInbox: Enqueue to the handler's start, first handlings of queued messages
//	outbox_relay_broker_up                   gauge      broker                            relay.Metrics.BrokerUp: 1 while the broker can be reached, 0 during an outage (see below)
//	outbox_relay_outages_total               counter    broker                            relay.Metrics.BrokerUp: outages begun, one per incident
//	outbox_relay_full_destinations           gauge      broker                            relay.Metrics.FullDestinations: streams or queues full while the broker is up
//
// outbox_oldest_pending_seconds is set by every poll. A poll skipped
// because the cold queue is full claims nothing and reads nothing: while
// the dispatcher still holds the oldest row found by the store's last
// claim, it sets the age that row has reached since, so that a stalled
// backlog keeps raising the lag alerts instead of freezing the gauge at
// its last claim; once that row was delivered it leaves the gauge as it
// was (the cold queue is shared by the dispatcher's stores: full, it does
// not mean this store is behind). It is the age of the rows a claim reads;
// once the dispatcher holds every row leased to this node, claims leave
// them out, so while it holds events of the store and a claim finds none
// due, the poller reads the store's first due time instead (at most every
// 10 poll intervals, 10 s at most): a backlog waiting in this node's
// queues for slow workers ages in the gauge too. The gauges keep the values last reported
// once the outbox is closed (the queue depths, the lag, the blocked keys):
// unregister the Collector, or ForgetStore, when the process goes on
// without it.
//
// outbox_claimed_total counts the rows a claim took: those this node's
// dispatcher already held, read again by a claim, are not counted.
//
// rate() and increase() see a counter's first increment only when its
// series existed before it, so series are created at 0 ahead of their
// first count where the labels are known: a store's series with its first
// signal, the done, retry and dead series of an event type on a path
// together with its first attempt there whose listeners ran, a type's two
// publish series with its first Publish. The first failure of a type
// delivered or published before is therefore seen; the first attempt of a
// type on a path, its first put_off, unhandled or interrupted attempt and
// its first Publish are in the counters but not in a rate over a window
// that begins before them.
//
// A relay learns of its broker from its publishes: outbox_relay_broker_up
// is 1 from the relay's creation, 0 from the publish that could not reach
// the broker to the first one it answers, and an idle relay goes on
// reporting its last state. A full destination's events are put off (and
// counted in outbox_put_off_total) until it has room; the broker's other
// destinations go on. Relays of one name (two relays to the same server)
// share its series, the last report winning: give them names apart
// (BreakerConfig.Name, through the relay's Config.Breaker). A closed
// relay's series keep the values its Close reported: up, no destination
// full.
//
// Metrics.DispatchSuccess and DispatchFailure are not counted apart:
// outbox_deliveries_total{outcome="done"|"retry"} has them with more
// labels. outbox_dead_total counts DEAD events from every cause (a last
// failed attempt, an undecodable row, an unhandled event under
// dispatcher.UnhandledDead); outbox_deliveries_total{outcome="dead"} only
// the attempts that failed for the last time. An event is counted DEAD
// once its row is: a DEAD write fenced off (another node took the event
// over and finished it) counts none. These names are stable:
// a new metric may be added, none is renamed or removed in a minor version.
//
// # Cardinality
//
// The label values are bounded: store by the databases of a tenant set
// (and the inboxes of a dispatcher), path, outcome, queue, status and mode
// by the lists above, event_type by the event types the program publishes,
// topic by the topics its inboxes receive and broker by its relays, finite
// sets chosen by its code. Config.MaxEventTypes (500) caps event_type and,
// counted apart, topic all the same: types or topics beyond it are counted
// as "(other)", so that a value built from data by mistake cannot flood
// Prometheus with series; Config.MaxBrokers (100) caps broker likewise.
// Event ids, message ids, sources, keys and errors are never labels.
// [Collector.ForgetStore] deletes the series of a store removed from a
// tenant set, or of an inbox removed from a dispatcher.
package prometheus
