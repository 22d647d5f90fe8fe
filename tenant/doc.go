// Package tenant runs the outbox and the inbox over several databases: one
// per tenant, shard or region.
//
// Each database gets its own store, identified by a stable store id (the
// Database's ID). Publishing goes to the tenant's database through the
// router ([Outbox.For], [Outbox.ForUUID]); one dispatcher with one worker
// pool delivers the events of every database, and one poller drains every
// database's outbox in the order of a [core.Selector]: [core.RoundRobin]
// (one batch from each store in turn) or [core.DrainFirst] (stay on a
// store until it yields nothing), or a policy of your own. Outcomes are
// written back to the database the event came from. On PostgreSQL
// databases a listener per database (LISTEN/NOTIFY, see
// jdbcstore.Notifier) wakes the poll of the database where an event
// committed without a hot path, so it is delivered within milliseconds
// instead of after Poller.Interval. Every log line about a
// store carries a "store" attribute, and a Metrics implementing
// core.StoreMetrics receives each store's signals separately.
//
// The set of databases is static (Config.Databases) or discovered
// (Config.Discover, called every RefreshInterval, 5 min by default): new
// databases get stores, removed ones stop taking work, finish what they
// hold and are closed; unchanged ones are left alone.
//
// [Inbox] gives the inbox the same treatment: a router to each database's
// inbox.Inbox and one work-queue dispatcher over all of them.
package tenant
