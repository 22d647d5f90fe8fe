package jdbcstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
)

// openMySQLTestStore returns a store with the schema applied on a new
// database; edit (optional) changes the connection settings.
func openMySQLTestStore(t *testing.T, cfg jdbcstore.Config, edit func(*mysql.Config)) *jdbcstore.Store {
	t.Helper()
	c := testdb.MySQLConfig(t)
	if edit != nil {
		edit(c)
	}
	st, err := jdbcstore.New(testdb.OpenMySQL(t, c), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// A real deadlock between two transactions is classified as contention.
func TestMySQLDeadlockIsBusy(t *testing.T) {
	t.Parallel()
	st := openMySQLTestStore(t, jdbcstore.Config{}, nil)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if err := st.Insert(ctx, st.DB(), mustEnv(t, core.NewEvent("T").ID(id).PayloadJSONString(`{}`)), testLease); err != nil {
			t.Fatal(err)
		}
	}
	lock := "UPDATE outbox_event SET attempts = attempts + 1 WHERE event_id = ?"
	tx1, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx1.Rollback() }()
	tx2, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx2.Rollback() }()
	if _, err := tx1.ExecContext(ctx, lock, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx2.ExecContext(ctx, lock, "b"); err != nil {
		t.Fatal(err)
	}
	// Whatever order the two statements reach the server in, the second
	// one closes the cycle and one transaction is chosen as the victim;
	// the other then gets its lock.
	errc := make(chan error, 1)
	go func() {
		_, err := tx1.ExecContext(ctx, lock, "b")
		errc <- err
	}()
	_, err2 := tx2.ExecContext(ctx, lock, "a")
	err1 := <-errc
	var victim error
	switch {
	case err1 != nil && err2 == nil:
		victim = err1
	case err2 != nil && err1 == nil:
		victim = err2
	default:
		t.Fatalf("want exactly one deadlock victim: tx1 %v, tx2 %v", err1, err2)
	}
	var me *mysql.MySQLError
	if !errors.As(victim, &me) || me.Number != 1213 || mysqldialect.Dialect.Classify(victim) != jdbcstore.ClassBusy {
		t.Fatalf("victim error %v: want 1213 classified busy", victim)
	}
}

// A status write that times out waiting for a row lock held by a business
// transaction (error 1205) is retried until the lock is released.
func TestMySQLStatusWriteRetriesLockWaitTimeout(t *testing.T) {
	t.Parallel()
	st := openMySQLTestStore(t, jdbcstore.Config{}, func(c *mysql.Config) {
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		c.Params["innodb_lock_wait_timeout"] = "1" // seconds, the minimum
	})
	ctx := t.Context()
	env := mustEnv(t, core.NewEvent("Locked").PayloadJSONString(`{}`))
	if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}
	holder, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, "SELECT event_id FROM outbox_event WHERE event_id = ? FOR UPDATE", env.ID()); err != nil {
		t.Fatal(err)
	}
	busy := make(chan error, 1)
	var once sync.Once
	jdbcstore.SetBusyHook(st, func(_ int, err error) { once.Do(func() { busy <- err }) })
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := markDone(ctx, st, env.ID())
		done <- result{ok, err}
	}()
	select {
	case err := <-busy:
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1205 {
			t.Fatalf("busy error = %v, want 1205", err)
		}
	case r := <-done:
		t.Fatalf("MarkDone returned %v, %v while the row was locked", r.ok, r.err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || !r.ok {
		t.Fatalf("MarkDone after the lock was released: %v, %v", r.ok, r.err)
	}

	// Inside the caller's transaction the store does not retry: the
	// error reaches the caller, who owns the transaction.
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	holder2, err := st.DB().BeginTxx(ctx2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder2.Rollback() }()
	if _, err := holder2.ExecContext(ctx2, "SELECT event_id FROM outbox_event WHERE event_id = ? FOR UPDATE", env.ID()); err != nil {
		t.Fatal(err)
	}
	caller, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caller.Rollback() }()
	// A duplicate key check on the locked row waits for the lock, then
	// times out.
	err = st.Insert(ctx, caller, env, testLease)
	if mysqldialect.Dialect.Classify(err) != jdbcstore.ClassBusy {
		t.Fatalf("insert in a caller's transaction on a locked key: err = %v, want a lock wait timeout", err)
	}
}

// checkSetup warns about a connection character set other than utf8mb4.
func TestMySQLCheckSetupWarnsAboutCharset(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	openMySQLTestStore(t, jdbcstore.Config{Logger: log}, nil)
	mu.Lock()
	if buf.Len() != 0 {
		t.Errorf("warnings on a utf8mb4 connection: %s", buf.String())
	}
	mu.Unlock()
	openMySQLTestStore(t, jdbcstore.Config{Logger: log}, func(c *mysql.Config) { c.Collation = "latin1_swedish_ci" })
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "not utf8mb4") || !strings.Contains(buf.String(), "character_set_connection=latin1") {
		t.Errorf("no charset warning on a latin1 connection: %q", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
