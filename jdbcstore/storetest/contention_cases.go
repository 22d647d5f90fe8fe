package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore"
)

// testContention checks that the dialect classifies lock contention as
// [jdbcstore.ClassBusy], as it comes from the driver and wrapped: the store
// retries statements (status writes, the inbox's transactions) only on
// that class, so a dialect that never returns it makes them fail at once
// where they should wait. The harness provokes the contention
// (Harness.Contend); the suite cannot, the means being the database's own.
func (s *suite) testContention(t *testing.T) {
	t.Parallel()
	if s.h.Contend == nil {
		t.Skip("storetest: Harness.Contend is not set: the dialect's classification of lock contention is not checked")
	}
	st := s.newStore(t, nil, jdbcstore.Config{})
	err := s.h.Contend(t, st)
	if err == nil {
		t.Fatal("Harness.Contend returned no error: it must return the error of a statement that met lock contention")
	}
	d := s.h.Dialect
	if c := d.Classify(err); c != jdbcstore.ClassBusy {
		t.Errorf("Classify(%v) = %v, want busy (lock contention the store retries)", err, c)
	}
	if c := d.Classify(fmt.Errorf("wrapped: %w", err)); c != jdbcstore.ClassBusy {
		t.Errorf("Classify of the contention error wrapped = %v, want busy (use errors.As)", c)
	}
}

// contentionWait bounds how long RowLockContention's update may wait for
// its row lock before the setup's timeout fails it.
const contentionWait = 30 * time.Second

// RowLockContention provokes lock contention on a database that locks
// rows (MySQL, MariaDB, PostgreSQL), for a [Harness.Contend]: it inserts an
// event into st's table, holds its row locked in one transaction (SELECT
// ... FOR UPDATE) and updates it from another connection, on which it
// first runs setup (the statements that make a lock wait end quickly:
// "SET SESSION innodb_lock_wait_timeout = 1" on MySQL/MariaDB, "SET
// lock_timeout = '100ms'" on PostgreSQL). It returns the update's error,
// and fails t on any other.
func RowLockContention(t *testing.T, st *jdbcstore.Store, setup ...string) error {
	t.Helper()
	ctx := t.Context()
	db := st.DB()
	env := jsonEvent(t, "contended")
	insert(t, st, env)
	table := st.Dialect().QuoteIdent(st.Table())
	holder, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatalf("RowLockContention: begin: %v", err)
	}
	defer func() { _ = holder.Rollback() }()
	var id string
	if err := holder.QueryRowxContext(ctx, sqlx.Rebind(st.Dialect().BindType(), "SELECT event_id FROM "+table+" WHERE event_id = ? FOR UPDATE"), env.ID()).Scan(&id); err != nil {
		t.Fatalf("RowLockContention: lock the row: %v", err)
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatalf("RowLockContention: a second connection: %v", err)
	}
	defer func() { _ = conn.Close() }()
	for _, q := range setup {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("RowLockContention: %s: %v", q, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, contentionWait)
	defer cancel()
	_, err = conn.ExecContext(wctx, sqlx.Rebind(st.Dialect().BindType(), "UPDATE "+table+" SET attempts = attempts + 1 WHERE event_id = ?"), env.ID())
	if wctx.Err() != nil {
		t.Fatalf("RowLockContention: the update waited %v for the lock: setup must make a lock wait end sooner", contentionWait)
	}
	return err
}
