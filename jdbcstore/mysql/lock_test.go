package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
)

// A DONE write locks its rows only, by primary key, however small the
// table: the optimizer chose to scan a table of a few rows, taking
// next-key locks on every row and gap it passed, so a DONE write waiting
// for a row that a business transaction's ordered insert had read held
// the gap that transaction's next insert needed. The business
// transaction died of a deadlock (Error 1213) and was rolled back.
func TestMySQLDoneWriteLocksOnlyItsRows(t *testing.T) {
	db := testdb.OpenMySQL(t, testdb.MySQLConfig(t))
	st := newMySQLStore(t, db, jdbcstore.Config{})
	ctx := t.Context()
	lease := core.Lease{Owner: "X", Until: time.Now().Add(time.Hour)}
	ids := []string{"b1", "b2", "b3", "b4", "b5"}
	for _, id := range ids {
		if err := st.Insert(ctx, db, mustBuild(t, core.NewEvent("T").ID(id).PayloadJSONString(`{}`)), lease); err != nil {
			t.Fatal(err)
		}
	}
	tx0 := db.MustBeginTx(ctx, nil)
	if _, err := st.InsertOrdered(ctx, tx0, mustBuild(t, core.NewEvent("T").ID("p5").OrderKey("K").PayloadJSONString(`{}`)), lease); err != nil {
		t.Fatal(err)
	}
	if err := tx0.Commit(); err != nil {
		t.Fatal(err)
	}

	// A business transaction publishes behind p5 on its key: its insert
	// reads p5 (a shared lock until it ends).
	biz := db.MustBeginTx(ctx, nil)
	defer func() { _ = biz.Rollback() }()
	if _, err := st.InsertOrdered(ctx, biz, mustBuild(t, core.NewEvent("T").ID("z1").OrderKey("K").PayloadJSONString(`{}`)),
		core.Lease{Owner: "Y", Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// The DONE write of b1..b5 and p5 waits for p5.
	done := make(chan error, 1)
	go func() {
		_, err := st.MarkDone(ctx, "X", append(ids, "p5"))
		done <- err
	}()
	// Blocked: its statement has been running for a while (an update of
	// six rows by primary key takes well under a millisecond).
	blocked := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'UPDATE%' AND TIME >= 1"
	if serverFlavor(t) == "mariadb" {
		blocked = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'UPDATE%' AND TIME_MS >= 200"
	}
	testsupport.WaitFor(t, 30*time.Second, "the DONE write to wait for p5's lock", func() bool {
		select {
		case err := <-done:
			t.Fatalf("MarkDone returned before the business transaction ended: %v", err)
		default:
		}
		var n int
		if err := db.GetContext(ctx, &n, blocked); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	// The business transaction's next insert, in the gap below p5.
	if err := st.Insert(ctx, biz, mustBuild(t, core.NewEvent("T").ID("p4").PayloadJSONString(`{}`)), core.Lease{}); err != nil {
		t.Fatalf("the business transaction's insert: %v", err)
	}
	if err := biz.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("MarkDone: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("MarkDone still waiting after the business transaction committed")
	}
}

// The reaper and a closing node's release of its leases pass over rows a
// business transaction holds (an event it published and has not
// committed, the event before an ordered one it published) without
// waiting for them: rows they do not change. Under InnoDB's REPEATABLE
// READ, the default, both statements locked every pending row they read
// (and the gaps between), so they waited for any open business
// transaction that had published, and with several keys in a transaction
// deadlocked it (Error 1213, the business transaction rolled back).
func TestMySQLLeaseSweepsSkipRowsTheyDoNotChange(t *testing.T) {
	db := testdb.OpenMySQL(t, testdb.MySQLConfig(t))
	st := newMySQLStore(t, db, jdbcstore.Config{})
	ctx := t.Context()
	live := core.Lease{Owner: "X", Until: time.Now().Add(time.Hour)}
	tx0 := db.MustBeginTx(ctx, nil)
	if _, err := st.InsertOrdered(ctx, tx0, mustBuild(t, core.NewEvent("T").ID("p1").OrderKey("K").PayloadJSONString(`{}`)), live); err != nil {
		t.Fatal(err)
	}
	if err := tx0.Commit(); err != nil {
		t.Fatal(err)
	}
	expired := core.Lease{Owner: "Y", Until: time.Now().Add(-time.Minute)}
	if err := st.Insert(ctx, db, mustBuild(t, core.NewEvent("T").ID("e1").PayloadJSONString(`{}`)), expired); err != nil {
		t.Fatal(err)
	}

	// A business transaction, left open, publishes behind p1 on its key
	// (reading p1 under a shared lock) and an unordered event.
	biz := db.MustBeginTx(ctx, nil)
	defer func() { _ = biz.Rollback() }()
	if _, err := st.InsertOrdered(ctx, biz, mustBuild(t, core.NewEvent("T").ID("z1").OrderKey("K").PayloadJSONString(`{}`)), live); err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(ctx, biz, mustBuild(t, core.NewEvent("T").ID("u1").PayloadJSONString(`{}`)), live); err != nil {
		t.Fatal(err)
	}

	sweep, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := st.ReapExpired(sweep, time.Now(), 100)
	if err != nil || n != 1 {
		t.Fatalf("reap beside the open transaction = %d, %v; want e1's expired lease released at once", n, err)
	}
	n, err = st.ReleaseLeases(sweep, "Y", nil)
	if err != nil || n != 0 {
		t.Fatalf("another owner's release beside the open transaction = %d, %v; want 0 at once", n, err)
	}
	if err := biz.Commit(); err != nil {
		t.Fatalf("the business transaction's commit: %v", err)
	}
	// z1 waits behind p1, unleased (the poller delivers it in turn).
	for id, owner := range map[string]string{"p1": "X", "z1": "", "u1": "X", "e1": ""} {
		r, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.LockedBy != owner {
			t.Errorf("%s is locked by %q, want %q", id, r.LockedBy, owner)
		}
	}
}
