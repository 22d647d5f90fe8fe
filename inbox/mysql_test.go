package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
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

// An inbox whose database hangs (a frozen private MariaDB) before the
// dispatcher's first cycle holds up the other inboxes' claims by its first
// reap, bounded by StatusTimeout: it was bounded by Lease, and a message
// of a healthy inbox waited 30 s.
func TestHungInboxFirstReapHoldsUpOthersOnlyStatusTimeout(t *testing.T) {
	ctx := context.Background()
	healthy, err := inbox.New(ctx, openMySQL(t), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	server := testdb.StartMariaDB(t)
	hung, err := inbox.New(ctx, server.Open(), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{StatusTimeout: time.Second, Lease: time.Hour,
		Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{})
	d.HandleFunc("t", func(context.Context, inbox.Record) error { close(handled); return nil })
	for id, in := range map[string]*inbox.Inbox{"healthy": healthy, "hung": hung} {
		if err := d.AddInbox(id, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := healthy.Enqueue(ctx, inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte{}}); err != nil {
		t.Fatal(err)
	}
	server.Freeze()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = d.Close(cctx)
	})
	// A bound, not a speed: a few StatusTimeouts against the Lease of an
	// hour the first reap waited before.
	testsupport.Recv(t, 20*time.Second, handled, "the healthy inbox's message handled")
}
