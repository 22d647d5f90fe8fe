package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// A plain transaction that has ended (committed or rolled back) is no
// transaction, as an ended txctx transaction is: ProcessTx returns an
// error matching core.ErrNoTransaction, and sql.ErrTxDone too, without
// calling fn. So does a transaction that fn ends itself: the Done mark
// cannot be written on it.
func TestProcessTxOnAnEndedTransaction(t *testing.T) {
	db := openSQLite(t)
	ctx := context.Background()
	in, err := inbox.New(ctx, db, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rolledBack, err := db.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rolledBack.Rollback(); err != nil {
		t.Fatal(err)
	}
	committed, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	if err := committed.Commit(); err != nil {
		t.Fatal(err)
	}
	for name, tx := range map[string]inbox.Tx{"rolled back *sql.Tx": rolledBack, "committed *sqlx.Tx": committed} {
		called := false
		processed, err := in.ProcessTx(ctx, tx, inbox.Message{Source: "s", MessageID: "m"}, func(context.Context) error {
			called = true
			return nil
		})
		if !errors.Is(err, core.ErrNoTransaction) || !errors.Is(err, sql.ErrTxDone) || processed || called {
			t.Errorf("%s: processed %v, fn called %v, err %v; want core.ErrNoTransaction and sql.ErrTxDone", name, processed, called, err)
		}
		// Said once, not three ways (no active transaction, has ended,
		// already committed or rolled back).
		if want := "outbox: inbox: process: outbox: no active transaction: sql: transaction has already been committed or rolled back"; err != nil && err.Error() != want {
			t.Errorf("%s: %q, want %q", name, err, want)
		}
	}
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	processed, err := in.ProcessTx(ctx, tx, inbox.Message{Source: "s", MessageID: "m"}, func(context.Context) error {
		return tx.Rollback() // fn ends the transaction: no Done mark can follow
	})
	if !errors.Is(err, core.ErrNoTransaction) || !errors.Is(err, sql.ErrTxDone) || processed {
		t.Errorf("fn ended the transaction: processed %v, err %v; want core.ErrNoTransaction and sql.ErrTxDone", processed, err)
	}
	if _, err := in.Get(ctx, "s", "m"); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("Get after the calls: %v, want ErrNotFound", err)
	}
}
