package txctx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/txctx"
)

// Adopting a nil transaction gives a Tx that is not active: every entry
// point reports core.ErrNoTransaction instead of panicking in
// database/sql, and Do on the returned context begins a transaction of its
// own instead of joining a nil one.
func TestAdoptNilTransaction(t *testing.T) {
	db := sqlx.NewDb(openDB(t), "sqlite3")
	m := txctx.NewX(db)
	adopters := map[string]func(ctx context.Context) (context.Context, *txctx.Tx){
		"Adopt":                func(ctx context.Context) (context.Context, *txctx.Tx) { return txctx.Adopt(ctx, nil) },
		"AdoptX":               func(ctx context.Context) (context.Context, *txctx.Tx) { return txctx.AdoptX(ctx, nil) },
		"AdoptX of an empty":   func(ctx context.Context) (context.Context, *txctx.Tx) { return txctx.AdoptX(ctx, &sqlx.Tx{}) },
		"Manager.Adopt":        func(ctx context.Context) (context.Context, *txctx.Tx) { return m.Adopt(ctx, nil) },
		"Manager.AdoptX":       func(ctx context.Context) (context.Context, *txctx.Tx) { return m.AdoptX(ctx, nil) },
		"Manager.AdoptX empty": func(ctx context.Context) (context.Context, *txctx.Tx) { return m.AdoptX(ctx, &sqlx.Tx{}) },
	}
	for name, adopt := range adopters {
		t.Run(name, func(t *testing.T) {
			noTx := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, core.ErrNoTransaction) {
					t.Errorf("%s: err = %v, want core.ErrNoTransaction", what, err)
				}
			}
			ctx, tx := adopt(context.Background())
			if tx == nil {
				t.Fatal("nil *Tx")
			}
			if tx.Active() {
				t.Error("Active() = true for a nil transaction")
			}
			if got, ok := txctx.From(ctx); !ok || got != tx {
				t.Errorf("From = %v, %v; want the adopted Tx", got, ok)
			}
			if ct, ok := core.TxFromContext(ctx); !ok || ct.Active() {
				t.Errorf("core.TxFromContext: %v, %v; want an inactive Tx", ct, ok)
			}
			var r recorder
			tx.AfterCommit(r.hook("c"))
			tx.AfterRollback(r.hook("r"))
			tx.BeforeCommit(nil, func(context.Context) error { t.Error("check ran"); return nil })
			_, err := tx.ExecContext(ctx, "INSERT INTO items(id, name) VALUES (1, 'x')")
			noTx("ExecContext", err)
			_, err = tx.QueryContext(ctx, "SELECT 1")
			noTx("QueryContext", err)
			noTx("Commit", tx.Commit())
			noTx("Rollback", tx.Rollback())
			noTx("second Commit", tx.Commit())
			if got := r.got(); got != "" {
				t.Errorf("hooks ran: %q", got)
			}

			// Publishing on it writes nothing.
			client, err := publish.New(nopInserter{t}, nil)
			if err != nil {
				t.Fatal(err)
			}
			env, err := core.JSONEvent("E", `{}`)
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.Publish(ctx, env)
			noTx("Publish", err)
			_, err = client.PublishAll(ctx, env)
			noTx("PublishAll", err)
			_, err = client.PublishTx(ctx, tx, env)
			noTx("PublishTx", err)

			// Do begins its own transaction.
			called := false
			err = m.Do(ctx, func(inner context.Context) error {
				called = true
				got, _ := txctx.From(inner)
				if got == tx || !got.Active() {
					t.Error("Do joined the nil transaction")
				}
				return insert(inner, t, 7)
			})
			if err != nil || !called {
				t.Fatalf("Do: called %v, err %v", called, err)
			}
			if n := countItems(t, db.DB); n != 1 {
				t.Fatalf("rows = %d, want 1", n)
			}
			if _, err := db.Exec("DELETE FROM items"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The warning for a hook registered on it names the state.
func TestAdoptNilHookWarning(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	_, tx := txctx.Adopt(context.Background(), nil, txctx.WithLogger(logger))
	tx.AfterCommit(func() {})
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, `tx_state="no transaction"`) {
		t.Fatalf("log:\n%s", out)
	}
}

// nopInserter fails the test if anything is inserted.
type nopInserter struct{ t *testing.T }

func (n nopInserter) Insert(context.Context, core.Execer, core.Envelope, core.Lease) error {
	n.t.Error("Insert called on a nil transaction")
	return nil
}
