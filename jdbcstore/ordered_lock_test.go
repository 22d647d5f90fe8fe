package jdbcstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
)

// On MySQL/MariaDB a transaction that published an ordered event, and
// stays open, blocks no other transaction's insert: neither an unordered
// event (whose order-index entry sorts before every key's) nor the first
// event of a key sorting before its own. Its check of the event before
// used to read that event by position in the order index, a locking read
// that under REPEATABLE READ also locked the gap before it until the
// transaction ended: those inserts waited innodb_lock_wait_timeout and
// failed. Both with the event before pending (the row waits for a
// poller) and finished (the row takes the lease).
func TestOrderedInsertTakesNoGapLock(t *testing.T) {
	for _, finished := range []bool{false, true} {
		st, db := orderedStores["mysql"](t)
		ctx := t.Context()
		lease := core.Lease{Owner: "node-1", Until: time.Now().Add(time.Minute)}
		first := orderedEvent(t, "m")
		inTx(t, db, func(ctx context.Context, tx core.Tx) {
			if _, err := st.InsertOrdered(ctx, tx, first, lease); err != nil {
				t.Fatalf("insert the key's first event: %v", err)
			}
		})
		if finished {
			if n, err := st.MarkDone(ctx, "node-1", []string{first.ID()}); err != nil || n != 1 {
				t.Fatalf("MarkDone = %d, %v", n, err)
			}
		}

		open, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Rollback() //nolint:errcheck // ends the test's open transaction
		leased, err := st.InsertOrdered(ctx, open, orderedEvent(t, "m"), lease)
		if err != nil || leased != finished {
			t.Fatalf("insert the key's second event = %v, %v; want %v, nil", leased, err, finished)
		}

		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close() //nolint:errcheck // returned to the pool
		if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
			t.Fatal(err)
		}
		other, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		unordered := mustEnv(t, core.NewEvent("AccountChanged").PayloadJSONString(`{}`))
		if err := st.Insert(ctx, other, unordered, lease); err != nil {
			t.Errorf("finished %v: an unordered insert while the ordered one's transaction is open: %v", finished, err)
		}
		if _, err := st.InsertOrdered(ctx, other, orderedEvent(t, "a"), lease); err != nil {
			t.Errorf("finished %v: the first event of a key sorting before: %v", finished, err)
		}
		if err := other.Commit(); err != nil {
			t.Errorf("commit: %v", err)
		}
	}
}

// A keys table an earlier release created, without the id columns:
// ordered inserts read the event before by position until ApplySchema
// adds them. The first event of a key published after the upgrade waits
// for a poller (its keys row recorded no id: the store cannot tell its
// predecessor finished without a read by position); the next one takes
// the lease. A store whose schema ApplySchema did not install finds the
// columns on its first claim.
func TestOrderedKeysTableUpgrade(t *testing.T) {
	db := testdb.MySQL(t)
	ctx := t.Context()
	newStore := func() *jdbcstore.Store {
		st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: mysqldialect.Dialect})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := newStore()
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.ByID() {
		t.Fatal("a new schema: ordered inserts do not read by id")
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE outbox_event_keys DROP COLUMN last_id, DROP COLUMN id_seq, DROP COLUMN prev_id"); err != nil {
		t.Fatal(err)
	}
	lease := core.Lease{Owner: "node-1", Until: time.Now().Add(time.Minute)}
	publishDone := func(st *jdbcstore.Store, wantLeased bool) {
		t.Helper()
		env := orderedEvent(t, "m")
		inTx(t, db, func(ctx context.Context, tx core.Tx) {
			leased, err := st.InsertOrdered(ctx, tx, env, lease)
			if err != nil || leased != wantLeased {
				t.Fatalf("InsertOrdered = %v, %v; want %v, nil", leased, err, wantLeased)
			}
		})
		owner := lease.Owner
		if !wantLeased {
			owner = "node-2"
			claimed, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: owner, Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), Limit: 10})
			if err != nil || len(claimed) != 1 || claimed[0].ID != env.ID() {
				t.Fatalf("claim = %v, %v; want %s alone", claimed, err, env.ID())
			}
		}
		if n, err := st.MarkDone(ctx, owner, []string{env.ID()}); err != nil || n != 1 {
			t.Fatalf("MarkDone = %d, %v", n, err)
		}
	}

	old := newStore() // the schema of an earlier release, not applied by this store
	if _, err := old.ClaimDue(ctx, core.ClaimRequest{Owner: "node-2", Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if old.ByID() {
		t.Fatal("keys table without the id columns: ordered inserts read by id")
	}
	publishDone(old, true)
	publishDone(old, true) // by position: the event before is DONE

	up := newStore()
	if err := up.ApplySchema(ctx); err != nil {
		t.Fatalf("ApplySchema over the earlier keys table: %v", err)
	}
	if !up.ByID() {
		t.Fatal("ApplySchema did not add the id columns")
	}
	publishDone(up, false) // the keys row recorded no id yet
	publishDone(up, true)

	lazy := newStore()
	if lazy.ByID() {
		t.Fatal("a store that neither applied its schema nor claimed reads by id")
	}
	if _, err := lazy.ClaimDue(ctx, core.ClaimRequest{Owner: "node-2", Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if !lazy.ByID() {
		t.Fatal("the first claim did not find the id columns")
	}
	publishDone(lazy, true)
}

// While nodes of an earlier release publish on the same keys (a rolling
// upgrade), their positions record no ids: an event published after one
// of theirs must not take the lease on the strength of an older event's
// id. Here the key's first event is DONE, an earlier-release store (one
// that reads by position: neither ApplySchema nor a claim ran) publishes
// the second, which waits; the third, published by an upgraded store,
// must wait behind it.
func TestOrderedByIDWithAnEarlierReleaseOnTheKey(t *testing.T) {
	st, db := orderedStores["mysql"](t)
	ctx := t.Context()
	if !st.ByID() {
		t.Fatal("the store does not read by id")
	}
	lease := core.Lease{Owner: "node-1", Until: time.Now().Add(time.Minute)}
	insert := func(st *jdbcstore.Store, env core.Envelope, lease core.Lease) bool {
		t.Helper()
		var leased bool
		inTx(t, db, func(ctx context.Context, tx core.Tx) {
			var err error
			if leased, err = st.InsertOrdered(ctx, tx, env, lease); err != nil {
				t.Fatalf("InsertOrdered %s: %v", env.ID(), err)
			}
		})
		return leased
	}
	first := orderedEvent(t, "k")
	if !insert(st, first, lease) {
		t.Fatal("the key's first event did not take the lease")
	}
	if n, err := st.MarkDone(ctx, "node-1", []string{first.ID()}); err != nil || n != 1 {
		t.Fatalf("MarkDone = %d, %v", n, err)
	}
	old, err := jdbcstore.New(db, jdbcstore.Config{Dialect: mysqldialect.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	if old.ByID() {
		t.Fatal("a store that neither applied its schema nor claimed reads by id")
	}
	if insert(old, orderedEvent(t, "k"), core.Lease{}) {
		t.Fatal("an unowned insert took a lease")
	}
	if insert(st, orderedEvent(t, "k"), lease) {
		t.Error("the third event took the lease while the second (published by the earlier-release store) is pending")
	}
}

// failingKeysUpgrade is the MySQL dialect with a keys upgrade the server
// refuses, as it does for an account without the ALTER right.
type failingKeysUpgrade struct{ jdbcstore.Dialect }

func (failingKeysUpgrade) KeysUpgrade() string {
	return "ALTER TABLE {{.Keys}} ADD COLUMN last_id NO_SUCH_TYPE;"
}

// A keys upgrade that fails does not fail ApplySchema: a WARN names the
// table, and ordered inserts keep reading by position.
func TestOrderedKeysUpgradeRefused(t *testing.T) {
	db := testdb.MySQL(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE outbox_event_keys (order_key VARBINARY(1020) NOT NULL PRIMARY KEY, last_seq BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	logger, logs := testsupport.NewLogger()
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: failingKeysUpgrade{mysqldialect.Dialect}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatalf("ApplySchema with a refused keys upgrade = %v, want nil", err)
	}
	if st.ByID() {
		t.Error("ordered inserts read by id without the columns")
	}
	if logs.Count("level=WARN", "lacks its id columns", "outbox_event_keys") != 1 {
		t.Errorf("want one WARN naming the keys table:\n%s", logs)
	}
	env := orderedEvent(t, "k")
	inTx(t, db, func(ctx context.Context, tx core.Tx) {
		if _, err := st.InsertOrdered(ctx, tx, env, core.Lease{}); err != nil {
			t.Fatalf("InsertOrdered after the refused upgrade: %v", err)
		}
	})
}

// racedKeysUpgrade is the MySQL dialect whose keys upgrade another node
// wins: the columns get added, then this node's own ALTER fails on them
// (duplicate column), as for each node but one starting at once.
type racedKeysUpgrade struct{ jdbcstore.Dialect }

func (d racedKeysUpgrade) KeysUpgrade() string {
	u := d.Dialect.(jdbcstore.KeysUpgrader).KeysUpgrade()
	return u + "\n" + u
}

// A node whose keys upgrade another node won says nothing: only the node
// whose ALTER added the columns logs "id columns added" (several nodes
// starting at once each logged it).
func TestOrderedKeysUpgradeLostToAnotherNodeIsQuiet(t *testing.T) {
	db := testdb.MySQL(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE outbox_event_keys (order_key VARBINARY(1020) NOT NULL PRIMARY KEY, last_seq BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	logger, logs := testsupport.NewLogger()
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: racedKeysUpgrade{mysqldialect.Dialect}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatalf("ApplySchema = %v", err)
	}
	if !st.ByID() {
		t.Error("the columns are there, but ordered inserts do not read by id")
	}
	if n := logs.Count("id columns added"); n != 0 || logs.Count("level=WARN") != 0 {
		t.Errorf("the node that lost the upgrade logged (%d 'id columns added'):\n%s", n, logs)
	}
	// The node whose ALTER did add them says so, once.
	if _, err := db.ExecContext(ctx, "ALTER TABLE outbox_event_keys DROP COLUMN last_id, DROP COLUMN id_seq, DROP COLUMN prev_id"); err != nil {
		t.Fatal(err)
	}
	won, err := jdbcstore.New(db, jdbcstore.Config{Dialect: mysqldialect.Dialect, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := won.ApplySchema(ctx); err != nil || logs.Count("level=INFO", "id columns added") != 1 {
		t.Errorf("ApplySchema = %v; want one 'id columns added':\n%s", err, logs)
	}
}

// A MySQL claim leaves the ordered events whose event before still holds
// the key, read again after its SKIP LOCKED pick: position 2 while
// position 1 is pending; kept once that is DONE, as are a key's first
// position and unordered events.
func TestClaimLeavesEventsHeldBack(t *testing.T) {
	st, db := orderedStores["mysql"](t)
	ctx := t.Context()
	lease := core.Lease{Owner: "node-1", Until: time.Now().Add(time.Minute)}
	first, second := orderedEvent(t, "h"), orderedEvent(t, "h")
	inTx(t, db, func(ctx context.Context, tx core.Tx) {
		for _, env := range []core.Envelope{first, second} {
			if _, err := st.InsertOrdered(ctx, tx, env, lease); err != nil {
				t.Fatal(err)
			}
		}
	})
	recs := []core.Record{
		{ID: "plain"},
		{ID: first.ID(), OrderKey: "h", OrderSeq: 1},
		{ID: second.ID(), OrderKey: "h", OrderSeq: 2},
	}
	ids := func(recs []core.Record) (out []string) {
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	got, err := st.WithoutHeldBack(ctx, slices.Clone(recs))
	if want := []string{"plain", first.ID()}; err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("with position 1 pending: %v, %v; want %v", ids(got), err, want)
	}
	if n, err := st.MarkDone(ctx, "node-1", []string{first.ID()}); err != nil || n != 1 {
		t.Fatalf("MarkDone = %d, %v", n, err)
	}
	got, err = st.WithoutHeldBack(ctx, slices.Clone(recs))
	if want := ids(recs); err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("with position 1 DONE: %v, %v; want %v", ids(got), err, want)
	}
}
