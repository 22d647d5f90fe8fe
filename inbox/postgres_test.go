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
