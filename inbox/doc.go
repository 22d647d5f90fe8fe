// Package inbox is the receiving side of the outbox: an idempotent
// receiver that processes each inbound message, identified by
// its source and message id, at most once in effect, however often it is
// delivered.
//
// Two modes share one table, whose DDL each database's dialect provides
// (jdbcstore/sqlite/schema/inbox.sql, jdbcstore/mysql/schema/inbox.sql,
// jdbcstore/postgres/schema/inbox.sql; see [Inbox.SchemaSQL]):
//
// Transactional. [Inbox.ProcessTx] runs inside the consumer's business
// transaction: it records (source, message id) with an upsert that locks
// the row, runs the business function on the same transaction unless the
// message is Done already, and marks it Done there. The effect and the
// mark commit together; concurrent redeliveries wait for the first and
// then skip. [Inbox.Process] opens the transaction itself and retries on
// lock contention.
//
//	processed, err := in.Process(ctx, inbox.Message{Source: "billing", MessageID: id, Topic: "invoice.paid"},
//		func(ctx context.Context, tx *sqlx.Tx) error {
//			_, err := tx.ExecContext(ctx, `UPDATE invoices SET paid = 1 WHERE id = ?`, invoiceID)
//			return err
//		})
//
// Work queue. [Inbox.Enqueue] stores the message (an upsert: a redelivery
// of a Done message changes nothing); a [Dispatcher] claims due messages
// with a lease and an owner token, runs the [Handler] of their topic, and
// acknowledges them, abandons them for a retry after min(2^attempt s, 60 s)
// (it wakes by itself for the retries it scheduled and for the DueAt of a
// message enqueued through its inbox in this process; other messages are
// claimed at the first poll after they are due, within PollInterval), or
// marks them Dead after MaxAttempts (10). Each claim charges an
// attempt, so a handling cut short by a crash counts as one: a message
// that kills its process is Dead after MaxAttempts, not retried for ever.
// Every outcome is fenced on the claim (the owner token and the lease
// expiry it wrote): a handler that outlived its lease cannot settle a
// later claim of its message, even by the same dispatcher. Expired leases
// are reaped and old Done messages deleted in batches. Claim, Ack,
// Abandon, AbandonAfter, Fail, ReapExpired, Get and Cleanup are available
// for workers of your own.
//
// Several databases. [NewMultiDispatcher] returns a dispatcher without an
// inbox; [Dispatcher.AddInbox] adds one per database (or tenant) under a
// store id, [Dispatcher.RemoveInbox] takes one out after its running
// handlers finish. One pool of workers and one set of handlers serve them
// all; each claim cycle takes a batch from the inbox that
// DispatcherConfig.Selector picks (core.RoundRobin or core.DrainFirst),
// outcomes go back to the inbox the message came from, every inbox is
// reaped and cleaned up, and log lines about an inbox carry its id as
// "store". A handler learns its message's inbox from [StoreID] and
// [FromContext]. Package tenant builds on this: a router to each
// database's Inbox, with discovery of the set of databases.
//
// Observation. Config.Observer (a core.InboxObserver, such as the
// OpenTelemetry and Prometheus modules of this repository provide) sees
// each ProcessTx and Process call and, through a dispatcher made by
// [Inbox.NewDispatcher] (or DispatcherConfig.Observer), each handling of a
// queued message: the business function or handler runs with the context
// it returns, and the outcome (processed, duplicate, failed, retry, dead,
// unhandled, interrupted) ends the observation.
//
// Times come from the application clock (Config.Now), as in the outbox
// store. Invalid arguments are refused before anything is written: a bad
// key (one among the keys of Ack, Release, Abandon, AbandonAfter or Fail
// refuses the whole call, on every database), topic, payload or hash with
// the Err* sentinels of this package (errors.Is), a bad limit, status or nil function with a
// *core.ConfigError (core.ErrInvalidConfig), and a handle that is not a
// transaction with core.ErrNoTransaction. Payloads are
// never logged.
package inbox
