package txctx_test

import (
	"context"
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
// database/sql: Commit says so (wrapping ctx's error) and runs the
// after-rollback hooks, whether database/sql's rollback had run before
// the Commit (sql.ErrTxDone) or not (ctx's error): which one was a race,
// and the hooks ran in one case only.
func TestAdoptedTransactionWhoseContextEndedRunsRollbackHooks(t *testing.T) {
	for _, settled := range []bool{false, true} {
		db := openDB(t)
		ctx, cancel := context.WithCancel(context.Background())
		raw, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		actx, tx := txctx.Adopt(ctx, raw)
		if _, err := tx.ExecContext(actx, `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
			t.Fatal(err)
		}
		rolledBack, committed := 0, 0
		tx.AfterRollback(func() { rolledBack++ })
		tx.AfterCommit(func() { committed++ })
		cancel()
		if settled {
			// database/sql's own rollback has run: Rollback on the raw
			// transaction reports it done.
			testsupport.WaitFor(t, 10*time.Second, "database/sql's rollback", func() bool {
				var n int
				return db.QueryRow(`SELECT COUNT(*) FROM items`).Scan(&n) == nil && n == 0 && raw.Rollback() != nil
			})
		}
		err = tx.Commit()
		if !errors.Is(err, context.Canceled) || rolledBack != 1 || committed != 0 {
			t.Errorf("settled %v: Commit = %v with %d after-rollback and %d after-commit hooks; want context.Canceled, 1 and 0", settled, err, rolledBack, committed)
		}
	}
}
