package core

import (
	"context"
	"database/sql"
)

// Tx is an active business transaction that can carry after-commit and
// after-rollback hooks. txctx implements it for database/sql and sqlx; other
// transaction managers can implement it to publish through the outbox's Publish.
type Tx interface {
	Execer
	// Active reports whether the transaction can still be written to.
	Active() bool
	// AfterCommit registers fn to run once, only after a successful commit.
	AfterCommit(fn func())
	// AfterRollback registers fn to run once, only after a rollback.
	AfterRollback(fn func())
}

// CommitChecker is implemented by transactions that can run checks just
// before they commit ([txctx.Tx] does). A check that fails makes the
// transaction roll back instead: its commit returns an error wrapping the
// check's error, and only the after-rollback hooks run.
//
// The SQL store registers one on MySQL and MariaDB, which may roll a
// transaction back on their own (deadlock, lock wait timeout, killed
// connection) while the driver carries on: if the business code ignored
// that failed statement, COMMIT would "succeed" on nothing and the
// after-commit hook would deliver an event whose row never existed. The
// check looks for the first event row the transaction inserted and fails
// with [ErrTxAborted] when it is gone. It runs only when the transaction
// cannot vouch that none of its statements failed (see [StatementWatcher]).
//
// The outbox's PublishTx only hands events to the hot path after commit when
// the store does not need the check (see [SilentRollbacker]) or the
// transaction implements CommitChecker and QueryRowContext (as *sql.Tx
// has it), which the check runs on; otherwise the poller delivers them.
type CommitChecker interface {
	// BeforeCommit registers check to run once, just before COMMIT, in
	// registration order. A non-nil key registered before on the same
	// transaction is ignored, so a store registers one check per
	// transaction however many events it inserts; keys are compared with
	// ==, so a key must be comparable (as a map key). The check runs on the
	// transaction (statements are allowed) with a context that is not
	// cancelled.
	BeforeCommit(key any, check func(ctx context.Context) error)
}

// SavepointWatcher is implemented by transactions that can tell whether a
// row written in them may have been removed before commit by a rollback to
// a savepoint ([txctx.Tx] does): a ROLLBACK statement ran through its own
// methods, or statements ran where it cannot see them (the raw transaction
// was taken, or the transaction was adopted). The outbox then reads, right
// after commit, which of the transaction's events are stored, and hands
// only those to its workers: an event whose row a ROLLBACK TO SAVEPOINT
// removed is never delivered.
type SavepointWatcher interface {
	// RowsMayBeUndone reports whether a row written in the transaction
	// may have been removed before commit by a rollback to a savepoint.
	RowsMayBeUndone() bool
}

// TxValues is implemented by transactions that keep values for as long as
// they live ([txctx.Tx] does). The outbox keeps there, in a transaction
// whose rows a rollback to a savepoint may have removed (see
// [SavepointWatcher]), which publish inserted each event id last: a
// publish whose row was undone and whose id a later publish of the
// transaction inserted again must not hand its own event over after
// commit. On a SavepointWatcher that is not a TxValues, the outbox hands
// nothing over after such a transaction's commit: the poller delivers
// what is stored.
type TxValues interface {
	// TxValue returns the value kept under key. When there is none it
	// stores init() and returns it, or returns nil when init is nil. Keys
	// are compared with ==, as map keys.
	TxValue(key any, init func() any) any
}

// StatementWatcher is implemented by transactions that see the outcome of
// the statements run on them ([txctx.Tx] does for statements run through
// its own methods). A database rolls a transaction back on its own only in
// answer to a statement that fails (deadlock, lock wait timeout, lost
// connection), so a transaction none of whose statements failed needs no
// check before commit: the SQL store skips its check then, and a
// publishing transaction costs no extra round trip.
type StatementWatcher interface {
	// MayHaveFailed reports whether a statement on the transaction failed,
	// or may have failed unseen: one ran on the raw handle, or returned
	// rows whose later errors the transaction cannot see.
	MayHaveFailed() bool
}

// SilentRollbacker is implemented by an [Inserter] whose database may roll
// a transaction back on its own without failing the later COMMIT (MySQL,
// MariaDB). The outbox's PublishTx then uses the hot path only on transactions
// that implement [CommitChecker], so no listener ever sees an event whose
// row did not commit.
type SilentRollbacker interface {
	SilentRollback() bool
}

// TxDatabase is implemented by transactions that know the database they
// were begun on ([txctx.Tx] does when it was begun or adopted through a
// Manager). The SQL store refuses to insert on a transaction of another
// database with [ErrForeignTx]. Database returns nil when unknown.
type TxDatabase interface {
	Database() *sql.DB
}

type txKey struct{}

// ContextWithTx returns a context carrying tx; the outbox's Publish finds it there.
func ContextWithTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFromContext returns the transaction carried by ctx, if any.
func TxFromContext(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok && tx != nil
}
