package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/txctx"
)

// Adopt and AdoptX of a nil transaction give a context on which Publish
// and PublishAll return core.ErrNoTransaction and a Tx whose Commit and
// Rollback do too, instead of a nil pointer panic in database/sql; InTx
// on that context begins a transaction of its own.
func TestAdoptNilTransactionIsNoTransaction(t *testing.T) {
	db := sqliteDB(t, "nil.db")
	ob, err := outbox.New(context.Background(), db, outbox.Config{DisablePoller: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	env := func() outbox.Envelope {
		e, err := outbox.JSONEvent("E", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for name, adopt := range map[string]func(context.Context) (context.Context, *txctx.Tx){
		"Adopt(nil)":         func(ctx context.Context) (context.Context, *txctx.Tx) { return ob.Adopt(ctx, nil) },
		"AdoptX(nil)":        func(ctx context.Context) (context.Context, *txctx.Tx) { return ob.AdoptX(ctx, nil) },
		"AdoptX(&sqlx.Tx{})": func(ctx context.Context) (context.Context, *txctx.Tx) { return ob.AdoptX(ctx, &sqlx.Tx{}) },
	} {
		t.Run(name, func(t *testing.T) {
			noTx := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, core.ErrNoTransaction) {
					t.Errorf("%s: err = %v, want core.ErrNoTransaction", what, err)
				}
			}
			ctx, tx := adopt(context.Background())
			if tx.Active() {
				t.Error("the Tx of a nil transaction is active")
			}
			_, err := ob.Publish(ctx, env())
			noTx("Publish", err)
			_, err = ob.PublishAll(ctx, env(), env())
			noTx("PublishAll", err)
			_, err = ob.PublishTx(ctx, tx, env())
			noTx("PublishTx", err)
			_, err = ob.PublishAllTx(ctx, tx, env())
			noTx("PublishAllTx", err)
			noTx("Commit", tx.Commit())
			noTx("Rollback", tx.Rollback())
			if n := countRows(t, db); n != 0 {
				t.Fatalf("rows = %d, want 0", n)
			}

			var id string
			err = ob.InTx(ctx, func(ctx context.Context) error {
				if inner, _ := txctx.From(ctx); inner == tx || !inner.Active() {
					t.Error("InTx joined the nil transaction")
				}
				id, err = ob.Publish(ctx, env())
				return err
			})
			if err != nil {
				t.Fatalf("InTx: %v", err)
			}
			if _, err := ob.Get(context.Background(), id); err != nil {
				t.Fatalf("event of InTx: %v", err)
			}
			if _, err := db.Exec(`DELETE FROM outbox_event`); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// PublishTx and PublishAllTx refuse a nil transaction of any type with
// core.ErrNoTransaction, an *sqlx.Tx wrapping none included.
func TestPublishTxNilTransactions(t *testing.T) {
	db := sqliteDB(t, "niltx.db")
	ob, err := outbox.New(context.Background(), db, outbox.Config{DisablePoller: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	env, err := outbox.JSONEvent("E", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for name, tx := range map[string]outbox.Tx{
		"nil":              nil,
		"(*sql.Tx)(nil)":   (*sql.Tx)(nil),
		"(*sqlx.Tx)(nil)":  (*sqlx.Tx)(nil),
		"&sqlx.Tx{}":       &sqlx.Tx{},
		"(*txctx.Tx)(nil)": (*txctx.Tx)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ob.PublishTx(context.Background(), tx, env); !errors.Is(err, core.ErrNoTransaction) {
				t.Errorf("PublishTx: %v, want core.ErrNoTransaction", err)
			}
			if _, err := ob.PublishAllTx(context.Background(), tx, env); !errors.Is(err, core.ErrNoTransaction) {
				t.Errorf("PublishAllTx: %v, want core.ErrNoTransaction", err)
			}
		})
	}
}
