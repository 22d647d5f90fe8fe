package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

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
