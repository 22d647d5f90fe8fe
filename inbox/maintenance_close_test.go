package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
)

// TestCloseInterruptsCleanupPostgres: Close of a dispatcher whose cleanup
// is under way (here waiting for a row lock another transaction holds; a
// large backlog of Done messages takes as long) interrupts it and returns
// nil at once: no handler runs, and each cleanup statement is atomic. It
// used to wait for the cleanup to finish, so until the lock was released
// or Close's ctx ended.
func TestCloseInterruptsCleanupPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	e := newEnv(t, openPostgres, inbox.Config{})
	pid := pastRetentionLocked(t, e, "m")

	d := e.dispatcher(inbox.DispatcherConfig{})
	if err := d.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	waitForBlocked(t, e, pid)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatalf("Close of a dispatcher running no handler = %v, want nil (it waited for the cleanup)", err)
	}
	mustEqual(t, "status", e.status("s", "m"), inbox.StatusDone) // the interrupted cleanup deleted nothing
}

// TestClaimsGoOnDuringCleanupPostgres: a cleanup under way (here waiting
// for a row lock another transaction holds on a Done message; a large
// backlog takes as long) does not hold up the claims: a message enqueued
// meanwhile is handled. The cleanup used to run in the claim loop, so no
// message of any of the dispatcher's inboxes was claimed until it ended.
func TestClaimsGoOnDuringCleanupPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	e := newEnv(t, openPostgres, inbox.Config{})
	pid := pastRetentionLocked(t, e, "done")

	d := e.dispatcher(inbox.DispatcherConfig{})
	handled := make(chan struct{}, 1)
	if err := d.HandleFunc("topic", func(context.Context, inbox.Record) error {
		select {
		case handled <- struct{}{}:
		default:
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.start(d)
	waitForBlocked(t, e, pid)
	e.enqueue(inbox.Message{Source: "s", MessageID: "new"})
	select {
	case <-handled:
	case <-time.After(waitTimeout):
		t.Fatal("a message enqueued during a cleanup was not handled: the cleanup holds up the claims")
	}
}

// TestRemoveInboxInterruptsCleanupPostgres: RemoveInbox of an inbox whose
// cleanup is under way (here waiting for a row lock) interrupts it and
// returns nil at once, where it waited for it until ctx ended and then
// failed.
func TestRemoveInboxInterruptsCleanupPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	e := newEnv(t, openPostgres, inbox.Config{})
	pid := pastRetentionLocked(t, e, "m")

	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{Logger: e.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.AddInbox("a", e.in); err != nil {
		t.Fatal(err)
	}
	e.start(d)
	waitForBlocked(t, e, pid)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.RemoveInbox(ctx, "a"); err != nil {
		t.Fatalf("RemoveInbox of an inbox running no handler = %v, want nil (it waited for the cleanup)", err)
	}
	mustEqual(t, "status", e.status("s", "m"), inbox.StatusDone)
}

// pastRetentionLocked processes message id of source "s" in e's inbox
// (Done), moves e's clock past the retention, so that the next cleanup
// deletes it, and locks the inbox's rows until t ends (lockInboxRows): a
// cleanup then waits. It returns the locking transaction's backend pid.
func pastRetentionLocked(t *testing.T, e *env, id string) int {
	t.Helper()
	if _, err := e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: id},
		func(context.Context, *sqlx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(inbox.DefaultRetention + time.Hour)
	return lockInboxRows(t, e)
}

// lockInboxRows locks every row of e's inbox table in a transaction of
// its own until t ends, and returns that transaction's backend pid.
func lockInboxRows(t *testing.T, e *env) int {
	t.Helper()
	tx, err := e.db.BeginTxx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var pid int
	if err := tx.QueryRowContext(e.ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(e.ctx, `SELECT 1 FROM `+e.in.Table()+` FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitForBlocked waits until a statement waits for a lock that the
// backend pid holds.
func waitForBlocked(t *testing.T, e *env, pid int) {
	t.Helper()
	waitFor(t, "a statement to wait for the row lock", func() bool {
		var n int
		err := e.db.QueryRowContext(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
		return err == nil && n > 0
	})
}

// TestRemoveInboxDuringAnothersCleanupPostgres: RemoveInbox of one inbox
// does not wait for the cleanup of another (here waiting for a row lock).
func TestRemoveInboxDuringAnothersCleanupPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	a := newEnv(t, openPostgres, inbox.Config{})
	b := newEnv(t, openPostgres, inbox.Config{Now: a.clock.Now})
	pid := pastRetentionLocked(t, a, "m")

	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{Logger: a.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	for id, e := range map[string]*env{"a": a, "b": b} {
		if err := d.AddInbox(id, e.in); err != nil {
			t.Fatal(err)
		}
	}
	a.start(d)
	waitForBlocked(t, a, pid)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.RemoveInbox(ctx, "b"); err != nil {
		t.Fatalf("RemoveInbox(b) during a's cleanup = %v, want nil", err)
	}
}
