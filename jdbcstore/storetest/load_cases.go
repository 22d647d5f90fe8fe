package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// testBusinessLoad: business transactions and status writes share one
// database. 8 goroutines commit 200 business transactions each (a business
// row plus an outbox row) while 4 goroutines mark the committed events
// DONE. Nothing may fail: no "database is locked" on SQLite, no deadlock
// surfacing on MySQL.
func (s *suite) testBusinessLoad(t *testing.T) {
	t.Parallel()
	const (
		writers  = 8
		txEach   = 200
		markers  = 4
		total    = writers * txEach
		orderDDL = `CREATE TABLE orders (ref VARCHAR(64) NOT NULL PRIMARY KEY, amount INTEGER NOT NULL)`
	)
	st := s.newStore(t, nil, jdbcstore.Config{})
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
	insertOrder := sqlx.Rebind(st.Dialect().BindType(), `INSERT INTO orders (ref, amount) VALUES (?, ?)`)

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
				if _, err := tx.ExecContext(ctx, insertOrder, ref, i); err != nil {
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
