package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/txctx"
)

// ProcessTx refuses a nil transaction of any type, a txctx transaction
// that is no longer active and a database handle (pool or connection)
// with core.ErrNoTransaction: it neither panics
// nor calls fn, and writes nothing.
func TestProcessTxWithoutTransaction(t *testing.T) {
	db := openSQLite(t)
	in, err := inbox.New(context.Background(), db, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, adoptedNil := txctx.Adopt(ctx, nil)
	raw, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	_, committed := txctx.AdoptX(ctx, raw)
	if err := committed.Commit(); err != nil {
		t.Fatal(err)
	}
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	connx, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer connx.Close()
	for name, tx := range map[string]inbox.Tx{
		"nil":                 nil,
		"(*sql.Tx)(nil)":      (*sql.Tx)(nil),
		"(*sqlx.Tx)(nil)":     (*sqlx.Tx)(nil),
		"&sqlx.Tx{}":          &sqlx.Tx{},
		"(*txctx.Tx)(nil)":    (*txctx.Tx)(nil),
		"txctx.Adopt(nil)":    adoptedNil,
		"committed *txctx.Tx": committed,
		"*sql.DB (the pool)":  db.DB,
		"*sqlx.DB (the pool)": db,
		// A connection autocommits each statement: no row lock would hold
		// a concurrent redelivery back until the effect commits.
		"*sql.Conn":  conn,
		"*sqlx.Conn": connx,
	} {
		t.Run(name, func(t *testing.T) {
			called := false
			processed, err := in.ProcessTx(ctx, tx, inbox.Message{Source: "s", MessageID: "m"}, func(context.Context) error {
				called = true
				return nil
			})
			if !errors.Is(err, core.ErrNoTransaction) || processed || called {
				t.Fatalf("ProcessTx: processed %v, fn called %v, err %v; want core.ErrNoTransaction", processed, called, err)
			}
		})
	}
	if _, err := in.Get(ctx, "s", "m"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("Get after the refused calls: %v, want ErrNotFound", err)
	}
}
