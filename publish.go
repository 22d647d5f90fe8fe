package outbox

import (
	"context"
	"database/sql"
)

// Tx is a transaction [Outbox.PublishTx] writes to: a *sql.Tx, a *sqlx.Tx
// or a *txctx.Tx (what txctx.From returns inside [Outbox.InTx]). A
// database handle is not a transaction and does not satisfy it.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	Commit() error
	Rollback() error
}

// Publish inserts env on the transaction carried by ctx (begun by
// [Outbox.InTx], or adopted with txctx.Adopt) and, once it commits, hands
// env straight to a worker: the hot path. It returns the event id.
// Without a transaction in ctx, or with one already committed or rolled
// back, it returns core.ErrNoTransaction and writes nothing (see
// [Outbox.PublishTx]). A full hot queue is not an error: the row stays NEW and
// the poller delivers it. Calls on one transaction must not overlap (see
// txctx.Tx): publish from one goroutine at a time, as with the
// transaction's other statements.
func (o *Outbox) Publish(ctx context.Context, env Envelope) (string, error) {
	return o.client.Publish(ctx, env)
}

// PublishTx inserts env on tx, a transaction on this outbox's database,
// and returns the event id; the event exists exactly when tx commits. How
// it is delivered depends on tx:
//
//   - a *txctx.Tx committed through it (as [Outbox.InTx] does) takes the
//     hot path, as with Publish: a worker gets the event right after
//     commit;
//   - a plain *sql.Tx or *sqlx.Tx has no after-commit hook, so the event
//     is inserted unowned and the poller delivers it once tx committed:
//     within Config.Poller.Interval after it is older than
//     Config.Poller.SkipRecent (five seconds and a second by default);
//     on PostgreSQL the commit also wakes the pollers of every node
//     (LISTEN/NOTIFY), which deliver it within milliseconds.
//     Adopt the tx (txctx.Adopt) and commit through the adopted *txctx.Tx
//     to get the hot path instead.
//
// A nil tx returns core.ErrNoTransaction, and so does a finished one,
// committed or rolled back (for a plain *sql.Tx or *sqlx.Tx, which cannot
// tell it before a statement, the error also matches sql.ErrTxDone); an
// invalid env returns its validation error. Nothing is written then, and
// a rollback of tx leaves nothing.
func (o *Outbox) PublishTx(ctx context.Context, tx Tx, env Envelope) (string, error) {
	return o.client.PublishTx(ctx, tx, env)
}
