package inbox_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
)

// TestMySQL runs the behaviour suite on MySQL/MariaDB (a fresh database per
// case; skipped without OUTBOX_TEST_MYSQL_DSN, failed with CI=true).
func TestMySQL(t *testing.T) {
	testdb.MySQLDSN(t)
	runSuite(t, openMySQL)
}

// TestConcurrentRedeliveryMySQL: see testConcurrentRedelivery.
func TestConcurrentRedeliveryMySQL(t *testing.T) {
	testdb.MySQLDSN(t)
	testConcurrentRedelivery(t, openMySQL)
}

// A REPEATABLE READ transaction whose snapshot predates another
// transaction's commit of the message still sees it Done: ProcessTx reads
// the row with a locking read (the latest committed version), not from the
// caller's snapshot. The clock stands still, so the upsert changes nothing
// in the row and cannot make it visible by itself.
func TestMySQLProcessTxReadsPastTheSnapshot(t *testing.T) {
	e := newEnv(t, openMySQL, inbox.Config{})
	msg := inbox.Message{Source: "s", MessageID: "m"}
	late, err := e.db.BeginTxx(e.ctx, nil) // REPEATABLE READ, the default
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
	if err != nil || p || ran {
		t.Fatalf("delivery on the old snapshot = %v, %v (fn ran: %v); want skipped", p, err, ran)
	}
}
