package outbox

import "context"

// PublishAll is [Outbox.Publish] for several events of one transaction,
// the one carried by ctx: it inserts them together (one multi-row INSERT
// per few hundred events, so ten events cost about what one does) and,
// once the transaction commits, hands each to a worker, as Publish does.
// It returns their ids in the order of envs.
//
// Every envelope is checked before anything is written: the first
// invalid one, an ordered one the store cannot order, or two with the
// same id fail the call with an error that is a *core.BatchError naming
// the event's index and id (errors.As) and wraps the cause (errors.Is
// core.ErrEmptyEventType, core.ErrDuplicateEvent, …). An id already in
// the table returns an error wrapping core.ErrDuplicateEvent (a
// *core.BatchError naming the event, unless the database could not say
// which it was); none of envs is left on the transaction then, and it is
// still usable. After any other error, roll the transaction
// back ([Outbox.InTx] does when fn returns the error): some of the
// events may be on it. No envs writes nothing and returns no ids.
// Without a transaction in ctx it returns core.ErrNoTransaction.
//
// Events delivered in order (an OrderKey, or Config.Ordering) are
// inserted one by one after the others, as Publish inserts them: several
// events of one key take consecutive positions in the order of envs and
// are delivered in that order. The keys are taken in key order, whatever
// their order in envs, so two batches on the same keys never deadlock
// each other on MySQL/MariaDB or PostgreSQL.
func (o *Outbox) PublishAll(ctx context.Context, envs ...Envelope) ([]string, error) {
	return o.client.PublishAll(ctx, envs...)
}

// PublishAllTx is [Outbox.PublishTx] for several events: it inserts envs
// on tx as [Outbox.PublishAll] does and returns their ids in order; they
// exist exactly when tx commits. As with PublishTx, a *txctx.Tx committed
// through it gets the hot path for every event, a plain *sql.Tx or
// *sqlx.Tx leaves them to the poller. A nil or finished tx returns
// core.ErrNoTransaction, as for PublishTx; with no envs, a finished plain
// *sql.Tx or *sqlx.Tx (which only a statement could tell) is not
// checked: nothing is written and no ids are returned.
func (o *Outbox) PublishAllTx(ctx context.Context, tx Tx, envs ...Envelope) ([]string, error) {
	return o.client.PublishAllTx(ctx, tx, envs...)
}
