// Package txctx runs business code in database/sql (or sqlx) transactions
// carried by a [context.Context], with hooks that run after the transaction
// commits or rolls back. A
// [*Tx] implements [core.Tx], and [Manager.Do] stores it in the context
// with [core.ContextWithTx], so outbox.Outbox.Publish finds the transaction
// and registers its after-commit hand-off there.
//
// Guarantees:
//   - after-commit hooks run only after a successful commit, in registration
//     order, each once;
//   - after-rollback hooks run after a rollback: an explicit one, fn
//     returning an error or panicking, a failed commit (the transaction is
//     then not known to have committed); no hooks run for a transaction
//     whose *sql.Tx was ended before, committed or rolled back directly
//     (or, adopted, rolled back by database/sql when its context ended:
//     the two cannot be told apart, see Adopt);
//   - hooks run after the transaction is finished, outside any lock of this
//     package; a panicking hook is recovered and logged, and the next hook
//     still runs. A hook that calls runtime.Goexit is logged too; the hooks
//     after it run before the goroutine ends.
//
// Typical use:
//
//	m := txctx.New(db)
//	err := m.Do(ctx, func(ctx context.Context) error {
//		tx, _ := txctx.From(ctx)
//		if _, err := tx.ExecContext(ctx, "INSERT INTO orders(id) VALUES (?)", id); err != nil {
//			return err // rolled back
//		}
//		_, err := client.Publish(ctx, env) // same transaction
//		return err                         // nil: committed, then hooks run
//	})
//
// Code that manages its own *sql.Tx can still publish: [Adopt] (or
// [Manager.Adopt]) wraps it, and the hooks run when the caller commits or
// rolls back through the returned [*Tx].
package txctx
