package jdbcstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/inboxrow"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// reapRace runs reap while another transaction re-leases the expired row
// it is about to release: lease (on its own transaction, uncommitted)
// takes the row; reap starts and waits on the row lock; the lease
// commits; reap ends. It returns how many rows reap reported.
func reapRace(t *testing.T, db *sqlx.DB, lease string, args []any, reap func(ctx context.Context) (int64, error)) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, lease, args...); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := reap(ctx)
		done <- result{n, err}
	}()
	// The reap waits for the row lock the lease holds.
	testsupport.WaitFor(t, 10*time.Second, "the reap to wait on the row lock", func() bool {
		var waiting int
		err := db.GetContext(ctx, &waiting, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%locked_by = NULL%'`)
		return err == nil && waiting > 0
	})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := testsupport.Recv(t, 10*time.Second, done, "the reap")
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.n
}

// On PostgreSQL a reap meeting a row whose expired lease a claim is
// renewing (uncommitted) leaves it alone, at once, without waiting for
// the claim (SKIP LOCKED): the claiming node goes on delivering, and no
// other node claims the event again.
func TestReapKeepsALeaseTakenMeanwhilePostgres(t *testing.T) {
	st, db := storeWithSchema(t, testdb.Postgres(t), pgdialect.Dialect)
	env := mustEnv(t, core.NewEvent("E").PayloadJSONString(`{}`))
	if err := st.Insert(t.Context(), db, env, core.Lease{Owner: "node-a", Until: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `UPDATE outbox_event SET locked_by = 'node-b', locked_until = now() + interval '1 hour' WHERE event_id = $1`, env.ID()); err != nil {
		t.Fatal(err)
	}
	reapCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, err := st.ReapExpired(reapCtx, time.Now(), 10); err != nil || n != 0 {
		t.Fatalf("reap beside the claim = %d, %v; want 0 at once", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.LockedBy != "node-b" {
		t.Errorf("the row is locked by %q; want node-b's new lease kept", r.LockedBy)
	}
}

// The same for the inbox's queued messages.
func TestInboxReapKeepsALeaseTakenMeanwhilePostgres(t *testing.T) {
	db := testdb.Postgres(t)
	st, err := inboxrow.Open(db, inboxrow.Options{Table: "inbox_message"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `INSERT INTO inbox_message (source, message_id, topic, payload, status, first_seen_at, last_seen_at,
		next_attempt_at, locked_by, locked_until)
		VALUES ('src', 'm-1', 't', '\x00', $1, now(), now(), now(), 'node-a', now() - interval '1 minute')`, int(inboxrow.Processing)); err != nil {
		t.Fatal(err)
	}
	n := reapRace(t, db, `UPDATE inbox_message SET locked_by = 'node-b', locked_until = now() + interval '1 hour' WHERE message_id = 'm-1'`,
		nil, func(ctx context.Context) (int64, error) { return st.ReapExpired(ctx, 10) })
	var lockedBy string
	if err := db.GetContext(t.Context(), &lockedBy, `SELECT COALESCE(locked_by, '') FROM inbox_message WHERE message_id = 'm-1'`); err != nil {
		t.Fatal(err)
	}
	if n != 0 || lockedBy != "node-b" {
		t.Errorf("reap released %d rows, the row is locked by %q; want 0 and node-b's new lease kept", n, lockedBy)
	}
}
