package jdbcstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/storetest"
)

// newSQLiteStore is the SQLite harness: a new database file per store.
func newSQLiteStore(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store {
	t.Helper()
	db, err := jdbcstore.OpenSQLite(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cfg.Dialect = jdbcstore.SQLite
	st, err := jdbcstore.New(db, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatalf("ApplySchema: %v", err)
	}
	return st
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{Name: "sqlite", NewStore: newSQLiteStore})
}

// The SQLite dialect stores payloads as BLOB: JSON is kept byte for byte,
// even where a JSON column would normalize it.
func TestSQLiteJSONPayloadByteExact(t *testing.T) {
	t.Parallel()
	st := newSQLiteStore(t, jdbcstore.Config{})
	const doc = "{ \"b\" : 1,\n\t\"a\":\"\\u00e9\", \"a\": 2.50, \"z\": [ ] }"
	env, err := core.NewEvent("Exact").PayloadJSONString(doc).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(t.Context(), st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Get(t.Context(), env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Payload) != doc {
		t.Fatalf("payload = %q, want %q", rec.Payload, doc)
	}
}

// Business transactions and status writes share one SQLite file: 8
// goroutines commit 200 business transactions each (a business row plus an
// outbox row) while 4 goroutines mark the committed events DONE. Nothing
// may fail with "database is locked".
func TestSQLiteConcurrentBusinessTxAndStatusWrites(t *testing.T) {
	t.Parallel()
	const (
		writers  = 8
		txEach   = 200
		markers  = 4
		total    = writers * txEach
		orderDDL = `CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, ref TEXT NOT NULL, amount INTEGER NOT NULL)`
	)
	st := newSQLiteStore(t, jdbcstore.Config{})
	ctx := t.Context()
	db := st.DB()
	if _, err := db.ExecContext(ctx, orderDDL); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		errs   []error
		notDup int
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	committed := make(chan string, markers*4)

	var markWG sync.WaitGroup
	for range markers {
		markWG.Go(func() {
			for id := range committed {
				ok, err := markDone(ctx, st, id)
				switch {
				case err != nil:
					fail(fmt.Errorf("MarkDone %s: %w", id, err))
				case !ok:
					mu.Lock()
					notDup++
					mu.Unlock()
				}
			}
		})
	}

	var writeWG sync.WaitGroup
	for w := range writers {
		writeWG.Go(func() {
			for i := range txEach {
				ref := fmt.Sprintf("order-%d-%d", w, i)
				env, err := core.NewEvent("OrderPlaced").AggregateType("Order").AggregateID(ref).
					PayloadValue(map[string]any{"ref": ref, "amount": i}).Build()
				if err != nil {
					fail(err)
					return
				}
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					fail(fmt.Errorf("begin: %w", err))
					continue
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO orders (ref, amount) VALUES (?, ?)`, ref, i); err != nil {
					_ = tx.Rollback()
					fail(fmt.Errorf("business insert: %w", err))
					continue
				}
				if err := st.Insert(ctx, tx, env, testLease); err != nil {
					_ = tx.Rollback()
					fail(fmt.Errorf("outbox insert: %w", err))
					continue
				}
				if err := tx.Commit(); err != nil {
					fail(fmt.Errorf("commit: %w", err))
					continue
				}
				committed <- env.ID()
			}
		})
	}
	writeWG.Wait()
	close(committed)
	markWG.Wait()

	if len(errs) > 0 {
		t.Fatalf("%d errors; first: %v", len(errs), errors.Join(errs[:min(len(errs), 5)]...))
	}
	if notDup != 0 {
		t.Errorf("%d MarkDone calls changed nothing", notDup)
	}
	counts, err := st.CountByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[core.StatusDone] != total || counts[core.StatusNew] != 0 {
		t.Errorf("counts = %v, want %d DONE", counts, total)
	}
	var orders int
	if err := db.GetContext(ctx, &orders, `SELECT COUNT(*) FROM orders`); err != nil {
		t.Fatal(err)
	}
	if orders != total {
		t.Errorf("orders = %d, want %d", orders, total)
	}
	if recs, err := st.PollPending(ctx, time.Now().Add(time.Hour), 0, 10); err != nil || len(recs) != 0 {
		t.Errorf("pending after all DONE: %d records, err %v", len(recs), err)
	}
}

const testOwner = "jdbcstore-test-owner"

var testLease = core.Lease{Owner: testOwner, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}

func markDone(ctx context.Context, st *jdbcstore.Store, id string) (bool, error) {
	n, err := st.MarkDone(ctx, testOwner, []string{id})
	return n == 1, err
}
