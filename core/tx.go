package core

import "context"

// Tx is an active business transaction that can carry after-commit and
// after-rollback hooks. txctx implements it for database/sql and sqlx; other
// transaction managers can implement it to use [Client.Publish].
type Tx interface {
	Execer
	// Active reports whether the transaction can still be written to.
	Active() bool
	// AfterCommit registers fn to run once, only after a successful commit.
	AfterCommit(fn func())
	// AfterRollback registers fn to run once, only after a rollback.
	AfterRollback(fn func())
}

type txKey struct{}

// ContextWithTx returns a context carrying tx; [Client.Publish] finds it there.
func ContextWithTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFromContext returns the transaction carried by ctx, if any.
func TxFromContext(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok && tx != nil
}
