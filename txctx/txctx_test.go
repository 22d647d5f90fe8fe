package txctx_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/mattn/go-sqlite3"
	"go.uber.org/goleak"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/internal/txopts"
	"github.com/outbox-go/outbox/txctx"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const schema = `
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE parent (id INTEGER PRIMARY KEY);
CREATE TABLE child (
	id INTEGER PRIMARY KEY,
	parent_id INTEGER NOT NULL REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED
);`

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	return db
}

// recorder records hook calls in order.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) hook(name string) func() {
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, name)
	}
}

func (r *recorder) got() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.calls, ",")
}

func insert(ctx context.Context, t *testing.T, id int) error {
	t.Helper()
	tx, ok := txctx.From(ctx)
	if !ok {
		t.Fatal("no tx in context")
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO items(id, name) VALUES (?, ?)", id, "item")
	return err
}

func countItems(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustTx(t *testing.T, ctx context.Context) *txctx.Tx {
	t.Helper()
	tx, ok := txctx.From(ctx)
	if !ok {
		t.Fatal("no tx in context")
	}
	return tx
}

var errBoom = errors.New("boom")

func TestDoCommitRunsAfterCommitHooksInOrder(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var r recorder
	var inside *txctx.Tx
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx := mustTx(t, ctx)
		inside = tx
		if !tx.Active() {
			t.Error("tx not active inside fn")
		}
		tx.AfterCommit(r.hook("c1"))
		tx.AfterRollback(r.hook("r1"))
		tx.AfterCommit(r.hook("c2"))
		tx.AfterCommit(r.hook("c3"))
		if r.got() != "" {
			t.Error("hook ran before commit")
		}
		return insert(ctx, t, 1)
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got := r.got(); got != "c1,c2,c3" {
		t.Fatalf("hooks = %q, want c1,c2,c3", got)
	}
	if n := countItems(t, db); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
	if inside.Active() {
		t.Error("Active() true after commit")
	}
	if inside.Sqlx() == nil || inside.SQL() == nil {
		t.Error("Sqlx()/SQL() nil on a managed tx")
	}
}

// A ctx done before Do begins returns its error, and fn never runs.
func TestDoWithADoneContextDoesNotCallFn(t *testing.T) {
	m := txctx.New(openDB(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := m.Do(ctx, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("Do with a cancelled ctx = %v, fn called %v; want context.Canceled and fn not called", err, called)
	}
}

// ctx bounds the wait for a connection: with the pool's only connection
// held elsewhere, Do returns ctx's error when ctx ends, without calling
// fn (it waited until the connection came free), and the pool is usable
// afterwards.
func TestDoHonoursTheContextWhileWaitingForAConnection(t *testing.T) {
	db := openDB(t)
	db.SetMaxOpenConns(1)
	m := txctx.New(db)
	held, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	called := false
	go func() { result <- m.Do(ctx, func(context.Context) error { called = true; return nil }) }()
	testsupport.WaitFor(t, 10*time.Second, "Do waiting for a connection", func() bool { return db.Stats().WaitCount > 0 })
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) || called {
			t.Fatalf("Do = %v, fn called %v; want context.Canceled and fn not called", err, called)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do still waiting for a connection 10 s after its ctx ended")
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Do(context.Background(), func(ctx context.Context) error { return insert(ctx, t, 1) }); err != nil {
		t.Fatalf("Do once the connection is free: %v", err)
	}
	if n := countItems(t, db); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

// A check registered with BeforeCommit that panics does not leave the
// transaction open (on SQLite holding the write lock, its connection out
// of the pool): it is rolled back, the after-rollback hooks run, and the
// panic goes on; through Do and through an adopted transaction's Commit.
func TestBeforeCommitCheckPanicRollsBack(t *testing.T) {
	db := openDB(t)
	db.SetMaxOpenConns(1) // a transaction left open would hold the only connection
	m := txctx.New(db)
	var r recorder
	var inside *txctx.Tx
	commit := func(run func()) (p any) {
		defer func() { p = recover() }()
		run()
		return nil
	}
	p := commit(func() {
		_ = m.Do(context.Background(), func(ctx context.Context) error {
			inside = mustTx(t, ctx)
			inside.AfterCommit(r.hook("c"))
			inside.AfterRollback(r.hook("r"))
			inside.BeforeCommit(nil, func(context.Context) error { panic("check broke") })
			return insert(ctx, t, 1)
		})
	})
	if p != "check broke" {
		t.Fatalf("Do: recovered %v, want the check's panic", p)
	}
	if got := r.got(); got != "r" || inside.Active() {
		t.Fatalf("hooks %q, Active %v; want r, false", got, inside.Active())
	}

	raw, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatalf("begin after the panic (the connection was not returned): %v", err)
	}
	ctx, tx := txctx.Adopt(context.Background(), raw)
	if _, err := tx.ExecContext(ctx, "INSERT INTO items(id, name) VALUES (2, 'x')"); err != nil {
		t.Fatal(err)
	}
	tx.AfterRollback(r.hook("r2"))
	tx.BeforeCommit(nil, func(context.Context) error { panic("adopted check broke") })
	if p := commit(func() { _ = tx.Commit() }); p != "adopted check broke" {
		t.Fatalf("Commit: recovered %v, want the check's panic", p)
	}
	if got := r.got(); got != "r,r2" {
		t.Fatalf("hooks %q, want r,r2", got)
	}
	if err := m.Do(context.Background(), func(ctx context.Context) error { return insert(ctx, t, 3) }); err != nil {
		t.Fatalf("Do after the panics: %v", err)
	}
	if n := countItems(t, db); n != 1 {
		t.Fatalf("rows = %d, want 1 (only the last transaction's)", n)
	}
}

func TestDoErrorRollsBack(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var r recorder
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx := mustTx(t, ctx)
		tx.AfterCommit(r.hook("c1"))
		tx.AfterRollback(r.hook("r1"))
		tx.AfterRollback(r.hook("r2"))
		if err := insert(ctx, t, 1); err != nil {
			return err
		}
		return errBoom
	})
	if err != errBoom { //nolint:errorlint // must be returned unchanged
		t.Fatalf("err = %v, want errBoom unchanged", err)
	}
	if got := r.got(); got != "r1,r2" {
		t.Fatalf("hooks = %q, want r1,r2", got)
	}
	if n := countItems(t, db); n != 0 {
		t.Fatalf("rows = %d, want 0", n)
	}
}

func TestDoPanicRollsBackAndRepanics(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var r recorder
	type panicValue struct{ n int }
	want := &panicValue{n: 7}
	var tx *txctx.Tx
	func() {
		defer func() {
			if p := recover(); p != want {
				t.Errorf("recovered %v, want the original value", p)
			}
		}()
		_ = m.Do(context.Background(), func(ctx context.Context) error {
			tx = mustTx(t, ctx)
			tx.AfterCommit(r.hook("c1"))
			tx.AfterRollback(r.hook("r1"))
			if err := insert(ctx, t, 1); err != nil {
				t.Error(err)
			}
			panic(want)
		})
		t.Error("Do returned instead of panicking")
	}()
	if got := r.got(); got != "r1" {
		t.Fatalf("hooks = %q, want r1", got)
	}
	if n := countItems(t, db); n != 0 {
		t.Fatalf("rows = %d, want 0", n)
	}
	if tx.Active() {
		t.Error("Active() true after panic")
	}
}

func TestDoGoexitRollsBack(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var r recorder
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Do(context.Background(), func(ctx context.Context) error {
			mustTx(t, ctx).AfterRollback(r.hook("r1"))
			if err := insert(ctx, t, 1); err != nil {
				t.Error(err)
			}
			runtime.Goexit() // what t.FailNow does
			return nil
		})
		t.Error("Do returned after Goexit")
	}()
	<-done
	if got := r.got(); got != "r1" {
		t.Fatalf("hooks = %q, want r1", got)
	}
	if n := countItems(t, db); n != 0 {
		t.Fatalf("rows = %d, want 0", n)
	}
}

// A hook that calls runtime.Goexit ends the committing goroutine, but the
// hooks after it (such as the outbox's hand-off to the dispatcher) still
// run, and the Goexit is logged.
func TestGoexitHookIsLoggedAndOthersRun(t *testing.T) {
	db := openDB(t)
	logger, logs := testsupport.NewLogger()
	m := txctx.New(db, txctx.WithLogger(logger))
	var r recorder
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Do(context.Background(), func(ctx context.Context) error {
			tx := mustTx(t, ctx)
			tx.AfterCommit(r.hook("c1"))
			tx.AfterCommit(func() { runtime.Goexit() })
			tx.AfterCommit(r.hook("c3"))
			tx.AfterCommit(func() { runtime.Goexit() })
			tx.AfterCommit(r.hook("c5"))
			return insert(ctx, t, 1)
		})
		t.Error("Do returned after a hook's Goexit")
	}()
	<-done
	if got := r.got(); got != "c1,c3,c5" {
		t.Fatalf("hooks = %q, want c1,c3,c5", got)
	}
	if n := countItems(t, db); n != 1 {
		t.Fatalf("rows = %d, want 1 (committed)", n)
	}
	for _, want := range []string{"level=ERROR", "runtime.Goexit", "hook=after_commit", "index=1", "index=3"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

func TestPanickingHookIsLoggedAndOthersRun(t *testing.T) {
	db := openDB(t)
	logger, logs := testsupport.NewLogger()
	m := txctx.New(db, txctx.WithLogger(logger))
	var r recorder
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx := mustTx(t, ctx)
		tx.AfterCommit(r.hook("c1"))
		tx.AfterCommit(func() { panic("hook exploded") })
		tx.AfterCommit(func() { panic(errBoom) })
		tx.AfterCommit(r.hook("c4"))
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got := r.got(); got != "c1,c4" {
		t.Fatalf("hooks = %q, want c1,c4", got)
	}
	out := logs.String()
	for _, want := range []string{
		"level=ERROR", "transaction hook panicked", "hook=after_commit", "index=1",
		"panic_type=string", `panic="hook exploded"`, "index=2", "panic=boom", "stack=", "runtime/debug.Stack",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}

	// Rollback hooks are protected the same way.
	r = recorder{}
	err = m.Do(context.Background(), func(ctx context.Context) error {
		tx := mustTx(t, ctx)
		tx.AfterRollback(func() { panic("rollback hook exploded") })
		tx.AfterRollback(r.hook("r2"))
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("err = %v", err)
	}
	if got := r.got(); got != "r2" {
		t.Fatalf("hooks = %q, want r2", got)
	}
	if !strings.Contains(logs.String(), "hook=after_rollback") {
		t.Errorf("rollback hook panic not logged:\n%s", logs.String())
	}
}

func TestNestedDoJoins(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var commits atomic.Int32

	err := m.Do(context.Background(), func(ctx context.Context) error {
		outer := mustTx(t, ctx)
		outer.AfterCommit(func() { commits.Add(1) })
		if err := insert(ctx, t, 1); err != nil {
			return err
		}
		return m.Do(ctx, func(ctx context.Context) error {
			inner := mustTx(t, ctx)
			if inner != outer {
				t.Error("nested Do began a new transaction")
			}
			inner.AfterCommit(func() { commits.Add(1) })
			return insert(ctx, t, 2)
		})
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if n := commits.Load(); n != 2 {
		t.Fatalf("after-commit hooks ran %d times, want 2 (one commit)", n)
	}
	if n := countItems(t, db); n != 2 {
		t.Fatalf("rows = %d, want 2", n)
	}

	// Inner error propagates; the outer Do rolls everything back.
	var r recorder
	err = m.Do(context.Background(), func(ctx context.Context) error {
		mustTx(t, ctx).AfterRollback(r.hook("outer"))
		if err := insert(ctx, t, 3); err != nil {
			return err
		}
		err := m.Do(ctx, func(ctx context.Context) error {
			mustTx(t, ctx).AfterRollback(r.hook("inner"))
			if err := insert(ctx, t, 4); err != nil {
				return err
			}
			return errBoom
		})
		if err != errBoom { //nolint:errorlint // must be returned unchanged
			t.Errorf("inner err = %v, want errBoom", err)
		}
		if !mustTx(t, ctx).Active() {
			t.Error("joined Do finished the outer transaction")
		}
		if r.got() != "" {
			t.Error("joined Do ran rollback hooks")
		}
		return err
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("outer err = %v, want errBoom", err)
	}
	if got := r.got(); got != "outer,inner" {
		t.Fatalf("hooks = %q, want outer,inner", got)
	}
	if n := countItems(t, db); n != 2 {
		t.Fatalf("rows = %d, want 2 (3 and 4 rolled back)", n)
	}
}

func TestDoAfterFinishedTxInContextBeginsNewTx(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var stale context.Context
	if err := m.Do(context.Background(), func(ctx context.Context) error {
		stale = ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.Do(stale, func(ctx context.Context) error {
		if mustTx(t, ctx) == mustTx(t, stale) {
			t.Error("joined a finished transaction")
		}
		return insert(ctx, t, 1)
	}); err != nil {
		t.Fatal(err)
	}
	if n := countItems(t, db); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

func TestDoForeignTx(t *testing.T) {
	db1, db2 := openDB(t), openDB(t)
	m1, m2 := txctx.New(db1), txctx.New(db2)
	called := false
	err := m1.Do(context.Background(), func(ctx context.Context) error {
		return m2.Do(ctx, func(context.Context) error {
			called = true
			return nil
		})
	})
	if !errors.Is(err, txctx.ErrForeignTx) {
		t.Fatalf("err = %v, want ErrForeignTx", err)
	}
	if called {
		t.Error("fn called with a foreign transaction")
	}
	if !strings.HasPrefix(txctx.ErrForeignTx.Error(), "outbox: ") {
		t.Error("sentinel message lacks outbox: prefix")
	}

	// A package-level adopted tx has no known database: foreign too.
	sqlTx, err := db1.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, tx := txctx.Adopt(context.Background(), sqlTx)
	if err := m1.Do(ctx, func(context.Context) error { return nil }); !errors.Is(err, txctx.ErrForeignTx) {
		t.Fatalf("Do on package-adopted tx: err = %v, want ErrForeignTx", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// otherTx is a core.Tx of another transaction manager.
type otherTx struct{}

func (otherTx) ExecContext(context.Context, string, ...any) (sql.Result, error) { return nil, nil }
func (otherTx) Active() bool                                                    { return true }
func (otherTx) AfterCommit(func())                                              {}
func (otherTx) AfterRollback(func())                                            {}

func TestDoForeignCoreTx(t *testing.T) {
	m := txctx.New(openDB(t))
	ctx := core.ContextWithTx(context.Background(), otherTx{})
	if err := m.Do(ctx, func(context.Context) error { return nil }); !errors.Is(err, txctx.ErrForeignTx) {
		t.Fatalf("err = %v, want ErrForeignTx", err)
	}
}

func TestCoreTxFromContext(t *testing.T) {
	m := txctx.New(openDB(t))
	err := m.Do(context.Background(), func(ctx context.Context) error {
		ct, ok := core.TxFromContext(ctx)
		if !ok {
			t.Fatal("core.TxFromContext found nothing")
		}
		tx, _ := txctx.From(ctx)
		if ct != core.Tx(tx) {
			t.Error("core.TxFromContext returned another tx")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := txctx.From(context.Background()); ok {
		t.Error("From found a tx in an empty context")
	}
	// From also finds a *Tx stored only through core.
	_, tx := txctx.Adopt(context.Background(), nil)
	if got, ok := txctx.From(core.ContextWithTx(context.Background(), tx)); !ok || got != tx {
		t.Error("From did not find a *Tx stored with core.ContextWithTx")
	}
}

// fakeInserter writes a minimal row on the caller's transaction.
type fakeInserter struct{}

func (fakeInserter) Insert(ctx context.Context, ex core.Execer, env core.Envelope, _ core.Lease) error {
	_, err := ex.ExecContext(ctx, "INSERT INTO items(name) VALUES (?)", env.ID())
	return err
}

type fakeHot struct {
	mu   sync.Mutex
	envs []core.Envelope
}

func (q *fakeHot) HotLease(core.Envelope) core.Lease { return core.Lease{} }

func (q *fakeHot) EnqueueHot(env core.Envelope, _ core.Lease) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.envs = append(q.envs, env)
	return true
}

func (q *fakeHot) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.envs)
}

func TestPublishThroughDo(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	hot := &fakeHot{}
	client, err := publish.New(fakeInserter{}, hot)
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.JSONEvent("OrderPlaced", `{"id":1}`)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := client.Publish(context.Background(), env); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("Publish without tx: %v, want ErrNoTransaction", err)
	}

	err = m.Do(context.Background(), func(ctx context.Context) error {
		_, err := client.Publish(ctx, env)
		if hot.len() != 0 {
			t.Error("hot queue fed before commit")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if hot.len() != 1 || countItems(t, db) != 1 {
		t.Fatalf("after commit: hot=%d rows=%d, want 1 and 1", hot.len(), countItems(t, db))
	}

	env2, _ := core.JSONEvent("OrderPlaced", `{"id":2}`)
	err = m.Do(context.Background(), func(ctx context.Context) error {
		if _, err := client.Publish(ctx, env2); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatal(err)
	}
	if hot.len() != 1 || countItems(t, db) != 1 {
		t.Fatalf("after rollback: hot=%d rows=%d, want 1 and 1", hot.len(), countItems(t, db))
	}
}

func TestAdoptCommitAndRollback(t *testing.T) {
	db := openDB(t)

	// Commit through the wrapper.
	sqlTx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	ctx, tx := txctx.Adopt(context.Background(), sqlTx)
	if got, _ := txctx.From(ctx); got != tx {
		t.Fatal("From did not return the adopted tx")
	}
	if tx.Sqlx() != nil {
		t.Error("Sqlx() not nil for an adopted *sql.Tx")
	}
	if tx.SQL() != sqlTx {
		t.Error("SQL() is not the adopted tx")
	}
	tx.AfterCommit(r.hook("c1"))
	tx.AfterRollback(r.hook("r1"))
	if err := insert(ctx, t, 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := r.got(); got != "c1" {
		t.Fatalf("hooks = %q, want c1", got)
	}
	if tx.Active() {
		t.Error("Active() after Commit")
	}
	if err := tx.Commit(); !errors.Is(err, txctx.ErrTxDone) || !errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("second Commit: %v, want ErrTxDone", err)
	}
	if err := tx.Rollback(); !errors.Is(err, txctx.ErrTxDone) {
		t.Fatalf("Rollback after Commit: %v, want ErrTxDone", err)
	}
	if got := r.got(); got != "c1" {
		t.Fatalf("hooks ran again: %q", got)
	}

	// Rollback through the wrapper.
	sqlTx, err = db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r = recorder{}
	ctx, tx = txctx.Adopt(context.Background(), sqlTx)
	tx.AfterCommit(r.hook("c1"))
	tx.AfterRollback(r.hook("r1"))
	if err := insert(ctx, t, 2); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := r.got(); got != "r1" {
		t.Fatalf("hooks = %q, want r1", got)
	}
	if err := tx.Rollback(); !errors.Is(err, txctx.ErrTxDone) {
		t.Fatalf("second Rollback: %v, want ErrTxDone", err)
	}
	if n := countItems(t, db); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

func TestAdoptX(t *testing.T) {
	db := sqlx.NewDb(openDB(t), "sqlite3")
	sqlxTx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	ctx, tx := txctx.AdoptX(context.Background(), sqlxTx)
	if tx.Sqlx() != sqlxTx || tx.SQL() != sqlxTx.Tx {
		t.Fatal("AdoptX does not expose the adopted tx")
	}
	tx.AfterCommit(r.hook("c1"))
	tx.AfterRollback(r.hook("r1"))
	if _, err := tx.Sqlx().ExecContext(ctx, tx.Sqlx().Rebind("INSERT INTO items(id, name) VALUES (?, ?)"), 1, "x"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count in tx = %d, %v", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, txctx.ErrTxDone) {
		t.Fatalf("second Commit: %v", err)
	}
	if got := r.got(); got != "c1" {
		t.Fatalf("hooks = %q, want c1", got)
	}

	sqlxTx, err = db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	r = recorder{}
	_, tx = txctx.AdoptX(context.Background(), sqlxTx)
	tx.AfterCommit(r.hook("c1"))
	tx.AfterRollback(r.hook("r1"))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := r.got(); got != "r1" {
		t.Fatalf("hooks = %q, want r1", got)
	}
}

func TestManagerAdoptIsJoinedByDo(t *testing.T) {
	db := sqlx.NewDb(openDB(t), "sqlite3")
	m := txctx.NewX(db)
	sqlxTx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	ctx, tx := m.AdoptX(context.Background(), sqlxTx)
	tx.AfterCommit(r.hook("outer"))
	if err := m.Do(ctx, func(ctx context.Context) error {
		if mustTx(t, ctx) != tx {
			t.Error("Do did not join the adopted tx")
		}
		mustTx(t, ctx).AfterCommit(r.hook("inner"))
		return insert(ctx, t, 1)
	}); err != nil {
		t.Fatal(err)
	}
	if !tx.Active() || r.got() != "" {
		t.Fatal("joined Do finished the adopted tx")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := r.got(); got != "outer,inner" {
		t.Fatalf("hooks = %q", got)
	}
	if n := countItems(t, db.DB); n != 1 {
		t.Fatalf("rows = %d", n)
	}

	sqlTx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, tx = m.Adopt(context.Background(), sqlTx)
	if err := m.Do(ctx, func(ctx context.Context) error { return insert(ctx, t, 2) }); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countItems(t, db.DB); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

func TestManagedCommitRollbackRefused(t *testing.T) {
	m := txctx.New(openDB(t))
	var r recorder
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx := mustTx(t, ctx)
		tx.AfterCommit(r.hook("c1"))
		if err := tx.Commit(); !errors.Is(err, txctx.ErrManagedTx) {
			t.Errorf("Commit: %v, want ErrManagedTx", err)
		}
		if err := tx.Rollback(); !errors.Is(err, txctx.ErrManagedTx) {
			t.Errorf("Rollback: %v, want ErrManagedTx", err)
		}
		if !tx.Active() {
			t.Error("refused Commit/Rollback finished the tx")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.got(); got != "c1" {
		t.Fatalf("hooks = %q, want c1", got)
	}
}

func TestCancelledContextStillRollsBack(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var r recorder

	ctx, cancel := context.WithCancel(context.Background())
	err := m.Do(ctx, func(ctx context.Context) error {
		mustTx(t, ctx).AfterRollback(r.hook("r1"))
		if err := insert(ctx, t, 1); err != nil {
			return err
		}
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if err != context.Canceled { //nolint:errorlint // must be returned unchanged, no rollback error joined
		t.Fatalf("err = %v, want exactly fn's error (rollback must succeed)", err)
	}
	if got := r.got(); got != "r1" {
		t.Fatalf("hooks = %q, want r1", got)
	}

	// fn ignores the cancellation: Do still does not commit.
	r = recorder{}
	ctx, cancel = context.WithCancel(context.Background())
	err = m.Do(ctx, func(ctx context.Context) error {
		mustTx(t, ctx).AfterCommit(r.hook("c1"))
		mustTx(t, ctx).AfterRollback(r.hook("r1"))
		if err := insert(ctx, t, 2); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := r.got(); got != "r1" {
		t.Fatalf("hooks = %q, want r1", got)
	}
	if n := countItems(t, db); n != 0 {
		t.Fatalf("rows = %d, want 0", n)
	}
	// The database is not left locked.
	if err := m.Do(context.Background(), func(ctx context.Context) error { return insert(ctx, t, 3) }); err != nil {
		t.Fatal(err)
	}
}

func TestCommitFailureRunsRollbackHooks(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db)
	var r recorder
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx := mustTx(t, ctx)
		tx.AfterCommit(r.hook("c1"))
		tx.AfterRollback(r.hook("r1"))
		// Deferred foreign key: the violation surfaces only at COMMIT.
		_, err := tx.ExecContext(ctx, "INSERT INTO child(id, parent_id) VALUES (1, 42)")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "outbox: commit") {
		t.Fatalf("err = %v, want a wrapped commit error", err)
	}
	if got := r.got(); got != "r1" {
		t.Fatalf("hooks = %q, want r1", got)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM child").Scan(&n); err != nil || n != 0 {
		t.Fatalf("child rows = %d, %v; want 0", n, err)
	}
}

func TestHookAfterFinishIsNoOpWithWarning(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	m := txctx.New(openDB(t), txctx.WithLogger(logger))
	var tx *txctx.Tx
	var r recorder
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx = mustTx(t, ctx)
		// A hook registering another hook runs after the tx finished.
		tx.AfterCommit(func() { tx.AfterCommit(r.hook("late-from-hook")) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tx.AfterCommit(r.hook("late-commit"))
	tx.AfterRollback(r.hook("late-rollback"))
	tx.AfterCommit(nil)
	if got := r.got(); got != "" {
		t.Fatalf("late hooks ran: %q", got)
	}
	out := logs.String()
	if c := strings.Count(out, "level=WARN"); c != 3 {
		t.Fatalf("WARN lines = %d, want 3:\n%s", c, out)
	}
	for _, want := range []string{"hook=after_commit", "hook=after_rollback", `tx_state=committed`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestConcurrentHookRegistration(t *testing.T) {
	m := txctx.New(openDB(t))
	const n = 200
	var commits, rollbacks atomic.Int32
	err := m.Do(context.Background(), func(ctx context.Context) error {
		tx := mustTx(t, ctx)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				tx.AfterCommit(func() { commits.Add(1) })
				tx.AfterRollback(func() { rollbacks.Add(1) })
				_ = tx.Active()
			})
		}
		wg.Wait()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := commits.Load(); got != n {
		t.Fatalf("after-commit hooks ran %d times, want %d", got, n)
	}
	if got := rollbacks.Load(); got != 0 {
		t.Fatalf("after-rollback hooks ran %d times", got)
	}
}

func TestConcurrentAdoptedCommitRollback(t *testing.T) {
	db := openDB(t)
	sqlTx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	_, tx := txctx.Adopt(context.Background(), sqlTx)
	var hooks atomic.Int32
	tx.AfterCommit(func() { hooks.Add(1) })
	tx.AfterRollback(func() { hooks.Add(1) })
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err == nil {
				ok.Add(1)
			} else if !errors.Is(err, txctx.ErrTxDone) {
				t.Errorf("err = %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || hooks.Load() != 1 {
		t.Fatalf("successful finishes = %d, hook runs = %d; want 1 and 1", ok.Load(), hooks.Load())
	}
}

func TestWithTxOptionsReadOnly(t *testing.T) {
	db := openDB(t)
	m := txctx.New(db, txctx.WithTxOptions(&sql.TxOptions{ReadOnly: true}))
	err := m.Do(context.Background(), func(ctx context.Context) error {
		rows, err := mustTx(t, ctx).QueryContext(ctx, "SELECT id FROM items")
		if err != nil {
			return err
		}
		return rows.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The yield hook (txopts.Hooks, set by outbox.New) is asked once before each transaction Do begins,
// before BEGIN, and never for a Do that joins the carried transaction.
func TestYieldHookAskedOncePerBegin(t *testing.T) {
	db := openDB(t)
	var asked atomic.Int32
	var inTx atomic.Bool
	m := txctx.New(db, txctx.Option(txopts.Hooks(nil, func() bool {
		if inTx.Load() {
			t.Error("yield hook asked while a transaction was open")
		}
		return asked.Add(1)%2 == 0 // yield every other time: both paths run
	})))
	for i := range 4 {
		err := m.Do(context.Background(), func(ctx context.Context) error {
			inTx.Store(true)
			defer inTx.Store(false)
			return m.Do(ctx, func(ctx context.Context) error { return insert(ctx, t, i) })
		})
		if err != nil {
			t.Fatalf("Do #%d: %v", i, err)
		}
	}
	if n := asked.Load(); n != 4 {
		t.Fatalf("yield hook asked %d times for 4 transactions (each with a joined Do), want 4", n)
	}
	if n := countItems(t, db); n != 4 {
		t.Fatalf("rows = %d, want 4", n)
	}
	// A nil function never yields and never fails.
	if err := txctx.New(db, txctx.Option(txopts.Hooks(nil, nil))).Do(context.Background(), func(ctx context.Context) error {
		return insert(ctx, t, 5)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestDoInvalidArguments(t *testing.T) {
	// No database: a nil one, or an *sqlx.DB holding none (the latter
	// panicked in Do).
	for name, m := range map[string]*txctx.Manager{
		"New(nil)":                         txctx.New(nil),
		"NewX(nil)":                        txctx.NewX(nil),
		"NewX(&sqlx.DB{})":                 txctx.NewX(&sqlx.DB{}),
		`NewX(sqlx.NewDb(nil, "sqlite3"))`: txctx.NewX(sqlx.NewDb(nil, "sqlite3")),
	} {
		if err := m.Do(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("%s: Do = %v, want ErrInvalidConfig", name, err)
		}
		if _, tx := m.Adopt(context.Background(), nil); tx.Database() != nil || tx.Active() {
			t.Fatalf("%s: Adopt(nil) = a Tx of database %p, active %v", name, tx.Database(), tx.Active())
		}
	}
	if err := txctx.New(openDB(t)).Do(context.Background(), nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("nil fn: %v", err)
	}
}
