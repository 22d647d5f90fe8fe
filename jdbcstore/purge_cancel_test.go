package jdbcstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
)

// A purge whose ctx ends while its DELETE runs on the server deletes
// nothing of that batch: MySQL/MariaDB go on with a statement whose
// client went away (go-sql-driver/mysql closes the connection, it does
// not kill the query), so an autocommit DELETE committed its rows after
// Purge had returned without them (and the cleaner's log and metrics never
// counted them). The DELETE is held on a row lock until the ctx ended,
// then let go; the rows must all be there once its session has finished.
func TestPurgeCancelledMidDeleteKeepsTheBatch(t *testing.T) {
	for _, name := range []string{"mysql", "postgres"} {
		t.Run(name, func(t *testing.T) {
			st, db := orderedStores[name](t)
			const rows = 50
			seedDone(t, st, db, rows)
			// Another transaction holds the page's last row.
			lock, err := db.BeginTxx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lock.Rollback() }()
			if _, err := lock.Exec(db.Rebind("SELECT event_id FROM outbox_event WHERE event_id = ? FOR UPDATE"), fmt.Sprintf("e-%04d", rows-1)); err != nil {
				t.Fatal(err)
			}
			waiting, running := deleteWaiting(t, db, lock)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			type result struct {
				res jdbcstore.PurgeResult
				err error
			}
			ended := make(chan result, 1)
			go func() {
				res, err := st.Purge(ctx, jdbcstore.PurgeOptions{DoneOlderThan: time.Hour, BatchSize: 100})
				ended <- result{res, err}
			}()
			testsupport.WaitFor(t, 30*time.Second, "the purge's DELETE waiting for the locked row", waiting)
			cancel()
			var r result
			select {
			case r = <-ended:
			case <-time.After(30 * time.Second):
				t.Fatal("Purge did not return after its ctx ended")
			}
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Purge = %+v, %v; want context.Canceled", r.res, r.err)
			}
			if err := lock.Commit(); err != nil {
				t.Fatal(err)
			}
			testsupport.WaitFor(t, 30*time.Second, "the DELETE's session to finish", func() bool { return !running() })
			var left int64
			if err := db.Get(&left, "SELECT COUNT(*) FROM outbox_event"); err != nil {
				t.Fatal(err)
			}
			if left != rows-r.res.Done {
				t.Errorf("%d rows left after a purge that reported %d of %d removed: the cancelled batch was deleted after Purge returned", left, r.res.Done, rows)
			}
		})
	}
}

// deleteWaiting returns whether a DELETE of db's database waits for a lock
// lock holds, and whether one still runs there at all.
func deleteWaiting(t *testing.T, db *sqlx.DB, lock *sqlx.Tx) (waiting, running func() bool) {
	t.Helper()
	if db.DriverName() == "mysql" {
		// The test's database is its own: a DELETE running in it is the
		// purge's, and waits on the row held.
		running = func() bool {
			var n int
			if err := db.Get(&n, "SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() AND info LIKE 'DELETE%'"); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}
		return running, running
	}
	var pid int
	if err := lock.Get(&pid, "SELECT pg_backend_pid()"); err != nil {
		t.Fatal(err)
	}
	waiting = func() bool {
		var n int
		if err := db.Get(&n, "SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	running = func() bool {
		var n int
		if err := db.Get(&n, "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE 'DELETE%'"); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	return waiting, running
}
