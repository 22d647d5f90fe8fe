package jdbcstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/txctx"
)

// orderedStores opens a store with its schema on each database, SQLite
// included, for the ordered-insert cases.
var orderedStores = map[string]func(t *testing.T) (*jdbcstore.Store, *sqlx.DB){
	"sqlite": func(t *testing.T) (*jdbcstore.Store, *sqlx.DB) {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return storeWithSchema(t, db, sqlite.Dialect)
	},
	"mysql": func(t *testing.T) (*jdbcstore.Store, *sqlx.DB) {
		return storeWithSchema(t, testdb.MySQL(t), mysqldialect.Dialect)
	},
	"postgres": func(t *testing.T) (*jdbcstore.Store, *sqlx.DB) {
		return storeWithSchema(t, testdb.Postgres(t), pgdialect.Dialect)
	},
}

func storeWithSchema(t *testing.T, db *sqlx.DB, d jdbcstore.Dialect) (*jdbcstore.Store, *sqlx.DB) {
	t.Helper()
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, db
}

// inTx runs fn in a transaction of db and commits it whatever fn's
// insert calls returned, as business code that goes on after an error it
// does not care about would.
func inTx(t *testing.T, db *sqlx.DB, fn func(ctx context.Context, tx core.Tx)) {
	t.Helper()
	err := txctx.NewX(db).Do(t.Context(), func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		fn(ctx, tx)
		return nil
	})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func orderedEvent(t *testing.T, key string) core.Envelope {
	t.Helper()
	return mustEnv(t, core.NewEvent("AccountChanged").OrderKey(key).PayloadJSONString(`{}`))
}

// A duplicate id on an ordered event, in a transaction the caller then
// commits (the duplicate leaves it usable), leaves no gap in the key's
// positions: the key's next event takes the position right after the
// pending one and waits for it instead of overtaking it, alone or in a
// batch whose other rows were taken back.
func TestOrderedDuplicateLeavesNoGap(t *testing.T) {
	for name, open := range orderedStores {
		t.Run(name, func(t *testing.T) {
			for _, batch := range []bool{false, true} {
				st, db := open(t)
				ctx := t.Context()
				lease := core.Lease{Owner: "node-1", Until: time.Now().Add(time.Minute)}
				pending := orderedEvent(t, "k")
				inTx(t, db, func(ctx context.Context, tx core.Tx) {
					if _, err := st.InsertOrdered(ctx, tx, pending, core.Lease{}); err != nil {
						t.Fatalf("insert the pending event: %v", err)
					}
				})
				other := orderedEvent(t, "other")
				inTx(t, db, func(ctx context.Context, tx core.Tx) {
					if _, err := st.InsertOrdered(ctx, tx, other, core.Lease{}); err != nil {
						t.Fatalf("insert the other key's event: %v", err)
					}
				})

				undone := orderedEvent(t, "k")
				inTx(t, db, func(ctx context.Context, tx core.Tx) {
					var err error
					if batch {
						// undone takes position 2 of k, then other's id is
						// found taken: undone is taken back.
						_, err = st.InsertBatch(ctx, tx, []core.Envelope{undone, other}, make([]core.Lease, 2))
					} else {
						_, err = st.InsertOrdered(ctx, tx, pending, lease)
					}
					if !errors.Is(err, core.ErrDuplicateEvent) {
						t.Fatalf("insert a duplicate (batch %v) = %v, want ErrDuplicateEvent", batch, err)
					}
				})
				if _, err := st.Get(ctx, undone.ID()); !errors.Is(err, core.ErrNotFound) {
					t.Fatalf("the batch's other event: %v, want ErrNotFound (taken back)", err)
				}

				next := orderedEvent(t, "k")
				var leased bool
				inTx(t, db, func(ctx context.Context, tx core.Tx) {
					var err error
					if leased, err = st.InsertOrdered(ctx, tx, next, lease); err != nil {
						t.Fatalf("insert the key's next event: %v", err)
					}
				})
				r, err := st.Get(ctx, next.ID())
				if err != nil {
					t.Fatal(err)
				}
				if r.OrderSeq != 2 || leased {
					t.Errorf("batch %v: next event at position %d, leased %v; want 2, false (behind the pending event at 1)",
						batch, r.OrderSeq, leased)
				}
				// A claim hands out the pending event, not the one behind it.
				claimed, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: "node-2", Now: time.Now(),
					LeaseUntil: time.Now().Add(time.Minute), Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claimed {
					if c.ID == next.ID() {
						t.Errorf("batch %v: the claim took the key's second event while its first is pending", batch)
					}
				}
				for _, c := range []core.Envelope{pending, other} {
					if r, err := st.Get(ctx, c.ID()); err != nil || r.OrderSeq != 1 {
						t.Errorf("batch %v: event %s at position %d (%v), want 1", batch, c.ID(), r.OrderSeq, err)
					}
				}
			}
		})
	}
}

// An ordered insert on a transaction of another database is refused
// before any statement: that database's keys table is left alone.
func TestOrderedInsertRefusesAForeignTransaction(t *testing.T) {
	for name, open := range orderedStores {
		t.Run(name, func(t *testing.T) {
			st, _ := open(t)
			_, otherDB := open(t)
			inTx(t, otherDB, func(ctx context.Context, tx core.Tx) {
				if _, err := st.InsertOrdered(ctx, tx, orderedEvent(t, "k"), core.Lease{}); !errors.Is(err, core.ErrForeignTx) {
					t.Errorf("InsertOrdered on another database's transaction = %v, want ErrForeignTx", err)
				}
				if _, err := st.InsertBatch(ctx, tx, []core.Envelope{orderedEvent(t, "k")}, make([]core.Lease, 1)); !errors.Is(err, core.ErrForeignTx) {
					t.Errorf("InsertBatch on another database's transaction = %v, want ErrForeignTx", err)
				}
			})
			var rows int
			if err := otherDB.Get(&rows, "SELECT COUNT(*) FROM outbox_event"); err != nil || rows != 0 {
				t.Errorf("the other database holds %d events (%v), want 0", rows, err)
			}
			if name != "sqlite" { // SQLite keeps no keys table
				if err := otherDB.Get(&rows, "SELECT COUNT(*) FROM outbox_event_keys"); err != nil || rows != 0 {
					t.Errorf("the other database's keys table holds %d rows (%v), want 0", rows, err)
				}
			}
		})
	}
}
