package inbox_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/txctx"
)

// ProcessTx inside a savepoint the business code rolls back (a nested
// transaction of an ORM that failed after it): the transaction commits the
// rest, the mark goes with the savepoint, and the message is processed
// again when it comes again, on every database. On MariaDB the check
// before commit found the Done row gone and failed the whole transaction
// with core.ErrTxAborted, every time, as if the server had rolled it back.
func testProcessTxRolledBackToASavepoint(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE effects (id INTEGER NOT NULL PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(e.ctx, `INSERT INTO effects (id, n) VALUES (1, 0), (2, 0)`); err != nil {
		t.Fatal(err)
	}
	bump := func(ctx context.Context, tx *txctx.Tx, id int) error {
		_, err := tx.ExecContext(ctx, e.db.Rebind(`UPDATE effects SET n = n + 1 WHERE id = ?`), id)
		return err
	}
	msg := inbox.Message{Source: "s", MessageID: "m1"}
	err := txctx.NewX(e.db).Do(e.ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if err := bump(ctx, tx, 1); err != nil { // the business write kept
			return err
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT nested`); err != nil {
			return err
		}
		p, err := e.in.ProcessTx(ctx, tx, msg, func(ctx context.Context) error { return bump(ctx, tx, 2) })
		if err != nil || !p {
			t.Errorf("ProcessTx = %v, %v; want processed", p, err)
		}
		_, err = tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT nested`)
		return err
	})
	if err != nil {
		t.Fatalf("commit after a rollback to a savepoint: %v", err)
	}
	var kept, undone int
	if err := e.db.QueryRowContext(e.ctx, `SELECT n FROM effects WHERE id = 1`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if err := e.db.QueryRowContext(e.ctx, `SELECT n FROM effects WHERE id = 2`).Scan(&undone); err != nil {
		t.Fatal(err)
	}
	if kept != 1 || undone != 0 {
		t.Fatalf("effects: kept %d, rolled back %d; want 1 and 0", kept, undone)
	}
	mustEqual(t, "status after the rollback to the savepoint", e.status("s", "m1"), inbox.Status(-1))
	// The message comes again: processed, this time for good.
	p, err := e.in.Process(e.ctx, msg, func(context.Context, *sqlx.Tx) error { return nil })
	if err != nil || !p {
		t.Fatalf("the next delivery: Process = %v, %v; want processed", p, err)
	}
	mustEqual(t, "status", e.status("s", "m1"), inbox.StatusDone)
}
