package txctx_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"

	"github.com/outbox-go/outbox/txctx"
)

// A transaction whose *sql.Tx was ended directly runs no hooks when it is
// then committed or rolled back through txctx (the usual deferred
// Rollback): whether it committed is unknown. Its after-rollback hooks ran
// after a direct commit, and the error did not match txctx.ErrTxDone.
func TestHooksDoNotRunOnATransactionEndedOutside(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		end  func(raw interface {
			Commit() error
			Rollback() error
		}) error
		rows int
	}{
		{"committed directly", func(raw interface {
			Commit() error
			Rollback() error
		}) error {
			return raw.Commit()
		}, 1},
		{"rolled back directly", func(raw interface {
			Commit() error
			Rollback() error
		}) error {
			return raw.Rollback()
		}, 0},
	} {
		for _, op := range []string{"Commit", "Rollback"} {
			t.Run(tc.name+", then "+op, func(t *testing.T) {
				db := openDB(t)
				raw, err := db.Begin()
				if err != nil {
					t.Fatal(err)
				}
				_, tx := txctx.Adopt(ctx, raw)
				hooks := 0
				tx.AfterCommit(func() { hooks++ })
				tx.AfterRollback(func() { hooks++ })
				if _, err := tx.ExecContext(ctx, `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
					t.Fatal(err)
				}
				if err := tc.end(raw); err != nil {
					t.Fatal(err)
				}
				if op == "Commit" {
					err = tx.Commit()
				} else {
					err = tx.Rollback()
				}
				if !errors.Is(err, txctx.ErrTxDone) {
					t.Errorf("%s after the *sql.Tx ended = %v, want txctx.ErrTxDone", op, err)
				}
				if hooks != 0 {
					t.Errorf("%d hooks ran, want none", hooks)
				}
				if tx.Active() {
					t.Error("still Active")
				}
				var n int
				if err := db.QueryRow(`SELECT COUNT(*) FROM items`).Scan(&n); err != nil || n != tc.rows {
					t.Errorf("%d rows (%v), want %d", n, err, tc.rows)
				}
			})
		}
	}
	// Inside Do: fn commits the *sql.Tx itself.
	db := openDB(t)
	hooks := 0
	err := txctx.New(db).Do(ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		tx.AfterCommit(func() { hooks++ })
		tx.AfterRollback(func() { hooks++ })
		if _, err := tx.ExecContext(ctx, `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
			return err
		}
		return tx.SQL().Commit()
	})
	if !errors.Is(err, txctx.ErrTxDone) || hooks != 0 {
		t.Errorf("Do whose fn committed the *sql.Tx = %v with %d hooks, want ErrTxDone and none", err, hooks)
	}
}

// An adopted transaction whose context ended was rolled back by
// database/sql. Commit says so (wrapping ctx's error); its after-rollback
// hooks run only when that rollback was still to come (Commit then gets
// ctx's error). Once database/sql has rolled it back, Commit gets
// sql.ErrTxDone, which a direct commit followed by the context's end
// gives too: no hooks run then (after-rollback hooks ran on committed rows).
func TestAdoptedTransactionWhoseContextEnded(t *testing.T) {
	for _, settled := range []bool{false, true} {
		db, raw, tx, cancel := adoptedWithARow(t)
		rolledBack, committed := 0, 0
		tx.AfterRollback(func() { rolledBack++ })
		tx.AfterCommit(func() { committed++ })
		cancel()
		if settled {
			testsupport.WaitFor(t, 10*time.Second, "database/sql's rollback", func() bool {
				return errors.Is(raw.Rollback(), sql.ErrTxDone)
			})
		}
		err := tx.Commit()
		wantHooks := 1
		if errors.Is(err, txctx.ErrTxDone) {
			wantHooks = 0 // database/sql's rollback came first (always when settled)
		}
		if !errors.Is(err, context.Canceled) || rolledBack != wantHooks || committed != 0 || (settled && wantHooks != 0) {
			t.Errorf("settled %v: Commit = %v with %d after-rollback and %d after-commit hooks", settled, err, rolledBack, committed)
		}
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM items`).Scan(&n); err != nil || n != 0 {
			t.Errorf("settled %v: %d rows, %v", settled, n, err)
		}
	}
	// A direct commit, then the context's end, then the usual deferred
	// Rollback: the rows are committed, and no after-rollback hook runs.
	for _, op := range []string{"Commit", "Rollback"} {
		_, raw, tx, cancel := adoptedWithARow(t)
		var err error
		hooks := 0
		tx.AfterRollback(func() { hooks++ })
		if err := raw.Commit(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if op == "Commit" {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if !errors.Is(err, txctx.ErrTxDone) || hooks != 0 {
			t.Errorf("%s after a direct commit and the context's end = %v with %d after-rollback hooks, want ErrTxDone and none", op, err, hooks)
		}
	}
}

// adoptedWithARow begins a transaction on a new database with a context
// cancel ends, adopts it with that context and inserts a row on it.
func adoptedWithARow(t *testing.T) (*sql.DB, *sql.Tx, *txctx.Tx, context.CancelFunc) {
	t.Helper()
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	raw, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	actx, tx := txctx.Adopt(ctx, raw)
	if _, err := tx.ExecContext(actx, `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	return db, raw, tx, cancel
}
