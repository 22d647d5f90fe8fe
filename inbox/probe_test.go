package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// Once a failing inbox's skip ends, whether its database answers again is
// found out by a probe beside the claims, not by a claim in the loop: a
// claim of a database that does not answer takes StatusTimeout, and in
// the loop it held up the claims of every other inbox for that long at
// every try. Here inbox "bad" fails at once (a trigger refuses every
// UPDATE of its table), then does not answer (its table is locked); the
// other inbox's message is handled meanwhile, and once "bad" answers
// again its messages are too.
func TestFailingInboxIsProbedBesideTheClaimsPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	bad := newEnv(t, openPostgres, inbox.Config{})
	good := newEnv(t, openPostgres, inbox.Config{Now: bad.clock.Now})
	table := bad.in.Table()
	refuseUpdates(t, bad, "refuse")
	const statusTimeout = 15 * time.Second // a hang of "bad" lasts that long
	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{Owner: "w", PollInterval: 10 * time.Millisecond,
		ReapInterval: time.Hour, StatusTimeout: statusTimeout, Lease: time.Minute, Logger: bad.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	for id, e := range map[string]*env{"bad": bad, "good": good} {
		if err := d.AddInbox(id, e.in); err != nil {
			t.Fatal(err)
		}
	}
	mustHandle(t, d, "t", func(context.Context, inbox.Record) error { return nil })
	bad.start(d)
	waitFor(t, "a failed claim of inbox bad", func() bool { return bad.logs.Count("inbox: claim failed", "refused") > 0 })

	// From now on "bad" does not answer: its statements wait for the lock.
	tx, err := bad.db.BeginTxx(bad.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var pid int
	if err := tx.QueryRowContext(bad.ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`LOCK TABLE ` + table + ` IN ACCESS EXCLUSIVE MODE`, `DROP TRIGGER refuse ON ` + table} {
		if _, err := tx.ExecContext(bad.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The next try of "bad" (after a skip of 1 s or 2 s) hangs: an
	// UPDATE, a claim or a reaping (the cleanup, a DELETE, waits too).
	waitFor(t, "an UPDATE of inbox bad waiting for the lock", func() bool {
		var n int
		err := bad.db.QueryRowContext(bad.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE 'UPDATE%'`, pid).Scan(&n)
		return err == nil && n > 0
	})
	var qs []string
	_ = bad.db.SelectContext(bad.ctx, &qs, `SELECT left(query, 40) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid)
	t.Logf("blocked: %q\nlogs: %s", qs, bad.logs.String())
	good.enqueue(inbox.Message{Source: "s", MessageID: "g", Topic: "t"})
	testsupport.WaitFor(t, statusTimeout/3, "the good inbox's message Done while inbox bad hangs",
		func() bool { return good.status("s", "g") == inbox.StatusDone })

	if err := tx.Commit(); err != nil { // "bad" answers again
		t.Fatal(err)
	}
	bad.enqueue(inbox.Message{Source: "s", MessageID: "b", Topic: "t"})
	waitFor(t, "inbox bad's message Done once it answers", func() bool { return bad.status("s", "b") == inbox.StatusDone })
}
