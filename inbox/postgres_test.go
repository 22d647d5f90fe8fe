package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
)

func openPostgres(t *testing.T) *sqlx.DB {
	t.Helper()
	return testdb.Postgres(t)
}

// TestPostgres runs the behaviour suite on PostgreSQL (a fresh schema per
// case; skipped without OUTBOX_TEST_POSTGRES_DSN, failed with CI=true).
func TestPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	runSuite(t, openPostgres)
}

// TestConcurrentRedeliveryPostgres: see testConcurrentRedelivery.
func TestConcurrentRedeliveryPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	testConcurrentRedelivery(t, openPostgres)
}

// A REPEATABLE READ transaction whose snapshot predates another
// transaction's commit of the message: ProcessTx's locking read of the
// row fails with a serialization error (PostgreSQL refuses to lock a row
// version newer than the snapshot) instead of reporting the message as
// new, so the handler never runs twice.
func TestPostgresProcessTxOnAnOldSnapshot(t *testing.T) {
	e := newEnv(t, openPostgres, inbox.Config{})
	msg := inbox.Message{Source: "s", MessageID: "m"}
	late, err := e.db.BeginTxx(e.ctx, &sqlTxRepeatableRead)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback() //nolint:errcheck
	var n int
	if err := late.GetContext(e.ctx, &n, "SELECT COUNT(*) FROM "+inbox.DefaultTable); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	if p, err := e.in.Process(e.ctx, msg, func(context.Context, *sqlx.Tx) error { return nil }); err != nil || !p {
		t.Fatalf("first delivery = %v, %v", p, err)
	}
	ran := false
	p, err := e.in.ProcessTx(e.ctx, late, msg, func(context.Context) error { ran = true; return nil })
	if ran || p || !errors.Is(err, inbox.ErrContention) {
		t.Fatalf("delivery on the old snapshot = %v, %v (fn ran: %v); want ErrContention", p, err, ran)
	}
}

var sqlTxRepeatableRead = sql.TxOptions{Isolation: sql.LevelRepeatableRead}

// Processes that start at once create the inbox table at once: none
// fails (PostgreSQL's CREATE … IF NOT EXISTS raced in its catalogs and
// the losers failed with a unique violation).
func TestPostgresNewAtOnce(t *testing.T) {
	db := openPostgres(t)
	for round := range 3 {
		table := "inbox_at_once_" + string(rune('a'+round))
		errs := make(chan error, 4)
		start := make(chan struct{})
		for range 4 {
			go func() {
				<-start
				_, err := inbox.New(context.Background(), db, inbox.Config{Table: table})
				errs <- err
			}()
		}
		close(start)
		for range 4 {
			if err := <-errs; err != nil {
				t.Errorf("inbox.New of %s by one of 4 processes at once: %v", table, err)
			}
		}
	}
}

// A commit that fails (here a deferred unique constraint the business
// function broke) fails the processing: Process returns the commit's
// error with its context, the observer sees the processing failed, not
// processed, and the message is not recorded.
func TestPostgresProcessCommitFails(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, openPostgres, inbox.Config{Observer: rec})
	if _, err := e.db.ExecContext(e.ctx, "CREATE TABLE effects (v int, CONSTRAINT effects_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED)"); err != nil {
		t.Fatal(err)
	}
	msg := inbox.Message{Source: "s", MessageID: "m"}
	ok, err := e.in.Process(e.ctx, msg, func(ctx context.Context, tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (v) VALUES (1), (1)") // checked at commit
		return err
	})
	if ok || err == nil || !strings.Contains(err.Error(), "outbox: inbox: process: commit:") {
		t.Fatalf("Process = %v, %v; want the commit's error", ok, err)
	}
	if o := rec.checkOne(t, 0, core.InboxTransactional, core.InboxFailed); o.result.Err == nil || o.result.NotRun {
		t.Errorf("result = %+v, want failed with the commit's error, the function run", o.result)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("%d processings observed, want 1", n)
	}
	if _, err := e.in.Get(e.ctx, "s", "m"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("Get after the failed commit: %v, want ErrNotFound", err)
	}
}
