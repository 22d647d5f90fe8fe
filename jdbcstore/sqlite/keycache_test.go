package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/txctx"
)

// twoStores opens one SQLite file through two stores, as two processes
// publishing on it would.
func twoStores(t testing.TB) (a, b *jdbcstore.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	open := func() *jdbcstore.Store {
		db, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: sqlite.Dialect})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ApplySchema(t.Context()); err != nil {
			t.Fatal(err)
		}
		return st
	}
	return open(), open()
}

// publishKeyed publishes an event of key through st in a txctx transaction
// (which has after-commit hooks), committing unless rollback; it returns
// the event and whether it took the lease.
func publishKeyed(t *testing.T, st *jdbcstore.Store, id, key string, rollback bool) (core.Envelope, bool) {
	t.Helper()
	env, err := core.NewEvent("Keyed").ID(id).OrderKey(key).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	var leased bool
	errRollback := errors.New("roll back")
	err = txctx.NewX(st.DB()).Do(t.Context(), func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		var err error
		leased, err = st.InsertOrdered(ctx, tx, env, core.Lease{Owner: testOwner, Until: time.Now().Add(time.Hour)})
		if err == nil && rollback {
			return errRollback
		}
		return err
	})
	if err != nil && !(rollback && errors.Is(err, errRollback)) {
		t.Fatalf("publish %s: %v", id, err)
	}
	return env, leased
}

func markDoneAll(t *testing.T, st *jdbcstore.Store, ids ...string) {
	t.Helper()
	if n, err := st.MarkDone(t.Context(), testOwner, ids); err != nil || n != int64(len(ids)) {
		t.Fatalf("MarkDone %v = %d, %v", ids, n, err)
	}
}

// A store publishes from the position it remembers; when another store
// (another process) published on the key meanwhile, the trigger refuses the
// stale position and the store reads the key's last event: positions stay
// gapless and in commit order, and the event behind a pending one waits.
func TestSQLiteOrderedRememberedPositionRefreshed(t *testing.T) {
	a, b := twoStores(t)
	e1, leased := publishKeyed(t, a, "k-1", "k", false)
	if !leased {
		t.Fatal("first event of a key did not take the lease")
	}
	markDoneAll(t, a, e1.ID())
	if _, leased := publishKeyed(t, a, "k-2", "k", false); !leased {
		t.Fatal("event after a DONE one (remembered) did not take the lease")
	}
	// b publishes on the key behind k-2, pending.
	if _, leased := publishKeyed(t, b, "k-3", "k", false); leased {
		t.Fatal("k-3 took the lease behind the pending k-2")
	}
	markDoneAll(t, a, "k-2")
	// a remembers k-2 as the key's last event, DONE: its insert at
	// position 3 is refused, it reads and goes behind k-3.
	if _, leased := publishKeyed(t, a, "k-4", "k", false); leased {
		t.Fatal("k-4 took the lease although k-3 (published by the other store) is pending")
	}
	for id, want := range map[string]int64{"k-1": 1, "k-2": 2, "k-3": 3, "k-4": 4} {
		r, err := a.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.OrderSeq != want {
			t.Errorf("%s at position %d, want %d", id, r.OrderSeq, want)
		}
	}
}

// A rolled-back publish leaves the remembered position as it was: the next
// event takes the position the rollback gave back.
func TestSQLiteOrderedRememberedPositionSurvivesRollback(t *testing.T) {
	a, _ := twoStores(t)
	publishKeyed(t, a, "r-1", "r", false)
	markDoneAll(t, a, "r-1")
	publishKeyed(t, a, "r-gone", "r", true)
	if _, leased := publishKeyed(t, a, "r-2", "r", false); !leased {
		t.Fatal("the event after a rollback did not take the lease")
	}
	r, err := a.Get(t.Context(), "r-2")
	if err != nil {
		t.Fatal(err)
	}
	if r.OrderSeq != 2 {
		t.Fatalf("r-2 at position %d, want 2 (the rollback's)", r.OrderSeq)
	}
}

// The schema refuses an ordered event at or below an existing position of
// its key, whoever inserts it.
func TestSQLiteOrderTriggerRefusesStalePosition(t *testing.T) {
	a, _ := twoStores(t)
	publishKeyed(t, a, "s-1", "s", false)
	publishKeyed(t, a, "s-2", "s", false)
	_, err := a.DB().ExecContext(t.Context(), "INSERT INTO outbox_event (event_id, event_type, occurred_at, payload, status,"+
		" available_at, created_at, order_key, order_seq) VALUES ('s-x', 'Keyed', 0, x'7b7d', 0, 0, 0, 's', 2)")
	if err == nil || !strings.Contains(err.Error(), "stale order position") {
		t.Fatalf("insert at a taken position: %v, want the trigger's refusal", err)
	}
}

// purgeDone removes every DONE row of st's table, as the retention purge
// does once they have aged, through a store of its own (a third process,
// whose clock is an hour ahead so that rows finished just now qualify).
func purgeDone(t *testing.T, st *jdbcstore.Store, want int64) {
	t.Helper()
	later := func() time.Time { return time.Now().Add(time.Hour) }
	p, err := jdbcstore.New(st.DB(), jdbcstore.Config{Dialect: sqlite.Dialect, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Purge(t.Context(), jdbcstore.PurgeOptions{DoneOlderThan: time.Minute})
	if err != nil || res.Done != want {
		t.Fatalf("Purge = %+v, %v; want %d DONE rows removed", res, err, want)
	}
}

// A store remembers its key's last event, DONE; the retention purge removes
// it and the key starts again at position 1, where another store (another
// process on the file) publishes an event that fails. The first store's
// next event must go behind it, unowned: the position it remembers is gone,
// and no pending event of the key may be passed.
func TestSQLiteOrderedRememberedPositionAfterPurge(t *testing.T) {
	a, b := twoStores(t)
	e1, leased := publishKeyed(t, a, "p-1", "p", false)
	if !leased {
		t.Fatal("first event of a key did not take the lease")
	}
	markDoneAll(t, a, e1.ID()) // a remembers position 1 of p, DONE
	purgeDone(t, b, 1)
	e2, leased := publishKeyed(t, b, "p-2", "p", false)
	if !leased {
		t.Fatal("first event of a purged key did not take the lease")
	}
	now := time.Now()
	if ok, err := b.MarkRetry(t.Context(), testOwner, e2.ID(), now.Add(time.Minute), now.Add(time.Minute), "downstream down"); err != nil || !ok {
		t.Fatalf("MarkRetry p-2 = %v, %v", ok, err)
	}
	if _, leased := publishKeyed(t, a, "p-3", "p", false); leased {
		t.Fatal("p-3 took the lease although p-2 (published by the other store after the purge) is pending")
	}
	for id, want := range map[string]int64{"p-2": 1, "p-3": 2} {
		r, err := a.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.OrderSeq != want {
			t.Errorf("%s at position %d, want %d", id, r.OrderSeq, want)
		}
	}
	if r, err := a.Get(t.Context(), "p-3"); err != nil || r.LockedBy != "" {
		t.Errorf("p-3 stored with owner %q (%v), want none", r.LockedBy, err)
	}
	// Nobody may claim p-3 before p-2 is DONE.
	later := time.Now().Add(2 * time.Hour)
	recs, err := a.ClaimDue(t.Context(), core.ClaimRequest{Owner: "other-node", Now: later, LeaseUntil: later.Add(time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == "p-3" {
			t.Errorf("p-3 claimed while p-2 is pending")
		}
	}
}

// A key whose remembered last event was purged, with no other writer,
// starts again at position 1 and takes the lease.
func TestSQLiteOrderedRememberedPositionPurgedRestarts(t *testing.T) {
	a, _ := twoStores(t)
	publishKeyed(t, a, "q-1", "q", false)
	markDoneAll(t, a, "q-1")
	purgeDone(t, a, 1)
	if _, leased := publishKeyed(t, a, "q-2", "q", false); !leased {
		t.Fatal("the first event after the purge did not take the lease")
	}
	r, err := a.Get(t.Context(), "q-2")
	if err != nil {
		t.Fatal(err)
	}
	if r.OrderSeq != 1 {
		t.Fatalf("q-2 at position %d, want 1", r.OrderSeq)
	}
	// And the store remembers the new position: the next event follows it.
	markDoneAll(t, a, "q-2")
	if _, leased := publishKeyed(t, a, "q-3", "q", false); !leased {
		t.Fatal("q-3, behind a DONE event, did not take the lease")
	}
	if r, err := a.Get(t.Context(), "q-3"); err != nil || r.OrderSeq != 2 {
		t.Fatalf("q-3 at position %d (%v), want 2", r.OrderSeq, err)
	}
}
