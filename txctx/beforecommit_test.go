package txctx_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/txctx"
)

func TestBeforeCommitRunsChecksInOrderOnTheTransaction(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var order []string
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
			return err
		}
		tx.AfterCommit(func() { order = append(order, "after-commit") })
		tx.BeforeCommit("k1", func(ctx context.Context) error {
			// The check sees the transaction's own writes.
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM items`).Scan(&n); err != nil {
				return err
			}
			order = append(order, "check1")
			if n != 1 {
				return errors.New("row missing")
			}
			return nil
		})
		tx.BeforeCommit("k1", func(context.Context) error { order = append(order, "dup"); return nil }) // same key: ignored
		tx.BeforeCommit(nil, func(context.Context) error { order = append(order, "check2"); return nil })
		tx.BeforeCommit(nil, func(context.Context) error { order = append(order, "check3"); return nil })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(order, ","), "check1,check2,check3,after-commit"; got != want {
		t.Fatalf("order = %s, want %s", got, want)
	}
}

func TestBeforeCommitFailureRollsBackAndRunsRollbackHooks(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	errCheck := errors.New("check failed")
	var committed, rolledBack bool
	var checkCtxErr error
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := m.Do(ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
			return err
		}
		tx.AfterCommit(func() { committed = true })
		tx.AfterRollback(func() { rolledBack = true })
		tx.BeforeCommit(nil, func(ctx context.Context) error { checkCtxErr = ctx.Err(); return errCheck })
		tx.BeforeCommit(nil, func(context.Context) error { t.Error("a check after a failed one ran"); return nil })
		return nil
	})
	if !errors.Is(err, errCheck) {
		t.Fatalf("Do = %v, want the check's error", err)
	}
	if committed || !rolledBack {
		t.Fatalf("committed=%v rolledBack=%v, want only the rollback hooks", committed, rolledBack)
	}
	if checkCtxErr != nil {
		t.Fatalf("check ctx err = %v", checkCtxErr)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM items`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("items = %d (%v), want 0: the transaction must have rolled back", n, err)
	}
}

func TestBeforeCommitOnAdoptedTx(t *testing.T) {
	db := openDB(t)
	sqlTx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	_, tx := txctx.Adopt(context.Background(), sqlTx)
	if _, err := tx.ExecContext(context.Background(), `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	tx.BeforeCommit(nil, func(context.Context) error { return core.ErrTxAborted })
	if err := tx.Commit(); !errors.Is(err, core.ErrTxAborted) {
		t.Fatalf("Commit = %v, want ErrTxAborted", err)
	}
	if err := tx.Commit(); !errors.Is(err, txctx.ErrTxDone) {
		t.Fatalf("second Commit = %v, want ErrTxDone", err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM items`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("items = %d (%v), want 0", n, err)
	}
}

func TestBeforeCommitOnFinishedTxIsIgnoredAndLogged(t *testing.T) {
	db := openDB(t)
	logger, logs := testsupport.NewLogger()
	m := txctx.New(db, txctx.WithLogger(logger))
	var kept *txctx.Tx
	if err := m.Do(context.Background(), func(ctx context.Context) error {
		kept, _ = txctx.From(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	kept.BeforeCommit(nil, func(context.Context) error { t.Error("ran"); return nil })
	if !strings.Contains(logs.String(), "hook=before_commit") {
		t.Fatalf("no warning logged: %s", logs)
	}
}

func TestDatabase(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	if err := m.Do(context.Background(), func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if tx.Database() != db {
			t.Error("Do: Database() is not the Manager's database")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, adopt := range map[string]func(*sqlx.Tx) *txctx.Tx{
		"Adopt":          func(x *sqlx.Tx) *txctx.Tx { _, t := txctx.Adopt(context.Background(), x.Tx); return t },
		"AdoptX":         func(x *sqlx.Tx) *txctx.Tx { _, t := txctx.AdoptX(context.Background(), x); return t },
		"Manager.Adopt":  func(x *sqlx.Tx) *txctx.Tx { _, t := m.Adopt(context.Background(), x.Tx); return t },
		"Manager.AdoptX": func(x *sqlx.Tx) *txctx.Tx { _, t := m.AdoptX(context.Background(), x); return t },
	} {
		x, err := sqlx.NewDb(db, "sqlite3").Beginx()
		if err != nil {
			t.Fatal(err)
		}
		got := adopt(x).Database()
		want := db
		if !strings.HasPrefix(name, "Manager") {
			want = nil
		}
		if got != want {
			t.Errorf("%s: Database() = %p, want %p", name, got, want)
		}
		_ = x.Rollback()
	}
	if !errors.Is(txctx.ErrForeignTx, core.ErrForeignTx) {
		t.Fatal("txctx.ErrForeignTx is not core.ErrForeignTx")
	}
}

func TestMayHaveFailed(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	ctx := context.Background()
	cases := map[string]flagCase{
		"nothing": {func(context.Context, *txctx.Tx) {}, false},
		"exec ok": {func(ctx context.Context, tx *txctx.Tx) {
			_, _ = tx.ExecContext(ctx, `INSERT INTO items VALUES (1, 'a')`)
		}, false},
		"exec failed": {func(ctx context.Context, tx *txctx.Tx) { _, _ = tx.ExecContext(ctx, `INSERT INTO nope VALUES (1)`) }, true},
		// The row's error may come at Scan, unseen (a deadlock met by a
		// locking read of several rows on MySQL: see
		// TestNoPhantomAfterServerRollbackMySQL).
		"query row: row unseen": {func(ctx context.Context, tx *txctx.Tx) { var n int; _ = tx.QueryRowContext(ctx, `SELECT 1`).Scan(&n) }, true},
		"query row failed": {func(ctx context.Context, tx *txctx.Tx) {
			var n int
			_ = tx.QueryRowContext(ctx, `SELECT x FROM nope`).Scan(&n)
		}, true},
		"query: rows unseen": {func(ctx context.Context, tx *txctx.Tx) {
			r, err := tx.QueryContext(ctx, `SELECT 1`)
			if err == nil {
				_ = r.Close()
			}
		}, true},
		"abort": {func(ctx context.Context, tx *txctx.Tx) {
			_, _ = tx.ExecContext(ctx, `ABORT`) // PostgreSQL's ROLLBACK
		}, true},
		"raw SQL handle":  {func(_ context.Context, tx *txctx.Tx) { _ = tx.SQL() }, true},
		"raw sqlx handle": {func(_ context.Context, tx *txctx.Tx) { _ = tx.Sqlx() }, true},
	}
	checkFlag(t, m, "MayHaveFailed", (*txctx.Tx).MayHaveFailed, cases)
	sqlTx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sqlTx.Rollback() }()
	if _, tx := txctx.Adopt(ctx, sqlTx); !tx.MayHaveFailed() {
		t.Fatal("an adopted transaction vouches for statements it never saw")
	}
	if _, tx := m.Adopt(ctx, sqlTx); !tx.MayHaveFailed() {
		t.Fatal("a transaction adopted by a Manager vouches for statements it never saw")
	}
}

// RowsMayBeUndone is true once a row written in the transaction may have
// been removed by a rollback to a savepoint: a statement holding
// "rollback" through the Tx's methods, the raw handle taken, or an
// adopted transaction; false for plain statements.
func TestRowsMayBeUndone(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	ctx := context.Background()
	cases := map[string]flagCase{
		"nothing": {func(context.Context, *txctx.Tx) {}, false},
		"exec and query": {func(ctx context.Context, tx *txctx.Tx) {
			_, _ = tx.ExecContext(ctx, `INSERT INTO items VALUES (1, 'a')`)
			_, _ = tx.ExecContext(ctx, `SAVEPOINT s1`)
			_, _ = tx.ExecContext(ctx, `RELEASE SAVEPOINT s1`)
			var n int
			_ = tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM items`).Scan(&n)
		}, false},
		"rollback to": {func(ctx context.Context, tx *txctx.Tx) {
			_, _ = tx.ExecContext(ctx, `SAVEPOINT s1`)
			_, _ = tx.ExecContext(ctx, `rollback to savepoint s1`)
		}, true},
		"after a comment": {func(ctx context.Context, tx *txctx.Tx) {
			_, _ = tx.ExecContext(ctx, `SAVEPOINT s1`)
			_, _ = tx.ExecContext(ctx, `/* nested */ ROLLBACK TRANSACTION TO s1`)
		}, true},
		"through a query": {func(ctx context.Context, tx *txctx.Tx) {
			_, _ = tx.ExecContext(ctx, `SAVEPOINT s1`)
			if r, err := tx.QueryContext(ctx, `ROLLBACK TO s1`); err == nil {
				_ = r.Close()
			}
		}, true},
		"abort": {func(ctx context.Context, tx *txctx.Tx) {
			_, _ = tx.ExecContext(ctx, `ABORT`) // PostgreSQL's ROLLBACK
		}, true},
		"raw SQL handle":  {func(_ context.Context, tx *txctx.Tx) { _ = tx.SQL() }, true},
		"raw sqlx handle": {func(_ context.Context, tx *txctx.Tx) { _ = tx.Sqlx() }, true},
	}
	checkFlag(t, m, "RowsMayBeUndone", (*txctx.Tx).RowsMayBeUndone, cases)
	sqlTx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sqlTx.Rollback() }()
	if _, tx := txctx.Adopt(ctx, sqlTx); !tx.RowsMayBeUndone() {
		t.Fatal("an adopted transaction vouches for statements it never saw")
	}
}

// flagCase is what a transaction runs, and the flag it must then have.
type flagCase struct {
	run  func(ctx context.Context, tx *txctx.Tx)
	want bool
}

// checkFlag runs each case in a transaction of m that it rolls back: the
// flag (named name) is false on a fresh transaction and tc.want after
// tc.run.
func checkFlag(t *testing.T, m *txctx.Manager, name string, flag func(*txctx.Tx) bool, cases map[string]flagCase) {
	t.Helper()
	for caseName, tc := range cases {
		t.Run(caseName, func(t *testing.T) {
			errDone := errors.New("roll back")
			err := m.Do(context.Background(), func(ctx context.Context) error {
				tx, _ := txctx.From(ctx)
				if flag(tx) {
					t.Fatalf("%s is true on a fresh transaction", name)
				}
				tc.run(ctx, tx)
				if got := flag(tx); got != tc.want {
					t.Errorf("%s = %v, want %v", name, got, tc.want)
				}
				return errDone
			})
			if !errors.Is(err, errDone) {
				t.Fatal(err)
			}
		})
	}
}

// An uncomparable key panics at once, and the panic rolls the transaction
// back as any panic in fn (its after-rollback hooks run): a slice key
// left the transaction's lock held, and Do hung for ever in its rollback.
// A comparable type holding an uncomparable value panics in the
// comparison, with the same outcome.
func TestBeforeCommitUncomparableKeyPanicsAndRollsBack(t *testing.T) {
	type holder struct{ v any }
	for name, keys := range map[string][2]any{
		"slice":                {[]int{1}, []int{2}},
		"holds a slice":        {holder{[]int{1}}, holder{[]int{2}}},
		"holds a map":          {holder{map[int]int{}}, holder{map[int]int{}}},
		"holds a slice, first": {holder{[]int{1}}, "k"}, // refused at once, not only when compared
		"comparable keys":      {"k", holder{"x"}},
	} {
		t.Run(name, func(t *testing.T) {
			db := openDB(t)
			m := txctx.New(db)
			rolledBack := make(chan struct{})
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				_ = m.Do(context.Background(), func(ctx context.Context) error {
					tx, _ := txctx.From(ctx)
					if _, err := tx.ExecContext(ctx, `INSERT INTO items (id, name) VALUES (1, 'a')`); err != nil {
						return err
					}
					tx.AfterRollback(func() { close(rolledBack) })
					for _, k := range keys {
						tx.BeforeCommit(k, func(context.Context) error { return nil })
					}
					return nil
				})
			}()
			select {
			case p := <-done:
				if name == "comparable keys" {
					if p != nil {
						t.Fatalf("Do panicked with comparable keys: %v", p)
					}
					return
				}
				if p == nil {
					t.Fatal("Do did not panic with an uncomparable BeforeCommit key")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Do hung after an uncomparable BeforeCommit key")
			}
			select {
			case <-rolledBack:
			default:
				t.Error("the after-rollback hook did not run")
			}
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM items`).Scan(&n); err != nil || n != 0 {
				t.Errorf("%d rows after the panic (%v), want the insert rolled back", n, err)
			}
		})
	}
}
