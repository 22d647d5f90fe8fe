package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/txctx"
)

// leasesOf returns n copies of lease.
func leasesOf(n int, lease core.Lease) []core.Lease {
	ls := make([]core.Lease, n)
	for i := range ls {
		ls[i] = lease
	}
	return ls
}

// jsonEvents returns n minimal JSON envelopes with ids prefix-0, prefix-1, ….
func jsonEvents(t *testing.T, prefix string, n int) []core.Envelope {
	t.Helper()
	envs := make([]core.Envelope, n)
	for i := range envs {
		envs[i] = jsonEvent(t, fmt.Sprintf("%s-%d", prefix, i))
	}
	return envs
}

// begin starts a transaction on st's database, rolled back at the end of
// the test unless committed.
func begin(t *testing.T, st *jdbcstore.Store) *sqlx.Tx {
	t.Helper()
	tx, err := st.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// insertBatch runs InsertBatch on tx with every event leased by lease.
func insertBatch(ctx context.Context, st *jdbcstore.Store, tx core.Execer, envs []core.Envelope, lease core.Lease) ([]bool, error) {
	return st.InsertBatch(ctx, tx, envs, leasesOf(len(envs), lease))
}

// absent fails t unless none of the events is stored.
func absent(t *testing.T, st *jdbcstore.Store, envs ...core.Envelope) {
	t.Helper()
	for _, env := range envs {
		if _, err := st.Get(t.Context(), env.ID()); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("%s: Get = %v, want ErrNotFound", env.ID(), err)
		}
	}
}

// batchErrorAt checks that err is a *core.BatchError at index (with the
// event's id) wrapping want.
func batchErrorAt(t *testing.T, err error, index int, id string, want error) {
	t.Helper()
	var be *core.BatchError
	if !errors.As(err, &be) || be.Index != index || be.ID != id || !errors.Is(err, want) {
		t.Fatalf("err = %v, want a *core.BatchError at %d (%s) wrapping %v", err, index, id, want)
	}
}

// Batch inserts (core.BatchInserter): every field of every row, chunks
// past one statement, all or nothing on an invalid envelope or a
// duplicate id (in the batch or in the table) with the transaction still
// usable, ordered events among them, the store's own database.
func (s *suite) testBatch(t *testing.T) {
	t.Run("RoundTripsMixedEvents", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		later := t0.Add(time.Hour)
		envs := []core.Envelope{
			build(t, core.NewEvent("OrderPlaced").ID("b-json").AggregateType("Order").AggregateID("o-1").TenantID("t-1").
				Header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").Header("k", "ü✓").
				PayloadJSONString(`{"total": 12.5, "items": [1, 2]}`)),
			build(t, core.NewEvent("Blob").ID("b-bytes").PayloadBytes([]byte{0, 1, 2, 0xff, 0xfe})),
			build(t, core.NewEvent("Later").ID("b-later").NotBefore(later).PayloadJSONString(`[]`)),
			build(t, core.NewEvent("Minimal").ID("b-min").PayloadJSONString(`{}`)),
		}
		tx := begin(t, st)
		leases := []core.Lease{testLease, testLease, {}, testLease}
		leased, err := st.InsertBatch(t.Context(), tx, envs, leases)
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{true, true, false, true}; fmt.Sprint(leased) != fmt.Sprint(want) {
			t.Errorf("leased = %v, want %v", leased, want)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for i, env := range envs {
			rec := get(t, st, env.ID())
			sameEnvelope(t, rec, env)
			if rec.Status != core.StatusNew || rec.Attempts != 0 {
				t.Errorf("%s: status %v, attempts %d", env.ID(), rec.Status, rec.Attempts)
			}
			sameTime(t, env.ID()+" CreatedAt", rec.CreatedAt, micro(t0))
			if rec.LockedBy != leases[i].Owner {
				t.Errorf("%s: LockedBy %q, want %q", env.ID(), rec.LockedBy, leases[i].Owner)
			}
			if rec.OrderKey != "" {
				t.Errorf("%s: OrderKey %q, want none", env.ID(), rec.OrderKey)
			}
		}
		sameTime(t, "AvailableAt of the delayed event", get(t, st, "b-later").AvailableAt, micro(later))
		sameTime(t, "AvailableAt", get(t, st, "b-min").AvailableAt, micro(t0))
	})

	t.Run("ManyStatements", func(t *testing.T) {
		// More rows than one statement takes (500), and a chunk that is
		// cut by its payload bytes (1 MiB).
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		envs := jsonEvents(t, "many", 1203)
		big := make([]byte, 300<<10)
		for i := range big {
			big[i] = 'a' + byte(i%26)
		}
		for i := 600; i < 606; i++ {
			envs[i] = build(t, core.NewEvent("Big").ID(fmt.Sprintf("many-%d", i)).PayloadBytes(big))
		}
		tx := begin(t, st)
		if _, err := insertBatch(t.Context(), st, tx, envs, testLease); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if c := countsOf(t, st); c[core.StatusNew] != len(envs) {
			t.Fatalf("NEW rows = %d, want %d", c[core.StatusNew], len(envs))
		}
		sameEnvelope(t, get(t, st, "many-603"), envs[603])
		sameEnvelope(t, get(t, st, "many-1202"), envs[1202])
	})

	t.Run("RolledBack", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		envs := jsonEvents(t, "rb", 10)
		tx := begin(t, st)
		if _, err := insertBatch(t.Context(), st, tx, envs, testLease); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		absent(t, st, envs...)
	})

	t.Run("InvalidEnvelopeWritesNothing", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		envs := jsonEvents(t, "inv", 3)
		envs[1] = core.Envelope{}
		tx := begin(t, st)
		_, err := insertBatch(t.Context(), st, tx, envs, testLease)
		batchErrorAt(t, err, 1, "", core.ErrEmptyEventType)
		var ve *core.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("err = %v, want a *core.ValidationError in it", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		absent(t, st, envs[0], envs[2])
		bad := core.Lease{Owner: string(make([]byte, core.MaxOwnerLen+1)), Until: t0}
		_, err = st.InsertBatch(t.Context(), st.DB(), envs[:1], []core.Lease{bad})
		if !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("too long an owner: err = %v, want ErrInvalidConfig", err)
		}
		if _, err := st.InsertBatch(t.Context(), st.DB(), envs[:1], nil); err == nil {
			t.Error("no leases for one event: no error")
		}
		if _, err := st.InsertBatch(t.Context(), nil, envs[:1], leasesOf(1, testLease)); !errors.Is(err, core.ErrNoTransaction) {
			t.Errorf("nil execer: err = %v, want ErrNoTransaction", err)
		}
		if leased, err := st.InsertBatch(t.Context(), st.DB(), nil, nil); err != nil || len(leased) != 0 {
			t.Errorf("empty batch = %v, %v; want nothing", leased, err)
		}
		absent(t, st, envs[0], envs[2])
	})

	t.Run("DuplicateInTheBatch", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		envs := jsonEvents(t, "dup", 4)
		envs[3] = jsonEvent(t, "dup-1")
		tx := begin(t, st)
		_, err := insertBatch(t.Context(), st, tx, envs, testLease)
		batchErrorAt(t, err, 3, "dup-1", core.ErrDuplicateEvent)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		absent(t, st, envs...)
	})

	// A duplicate of a stored id, in the first statement and in a later
	// one (after 500 rows went in): nothing of the batch stays, and the
	// transaction goes on.
	for _, at := range []int{2, 550} {
		t.Run(fmt.Sprintf("DuplicateOfAStoredEventAt%d", at), func(t *testing.T) {
			t.Parallel()
			st := s.newStore(t, nil, jdbcstore.Config{})
			stored := build(t, core.NewEvent("Stored").ID("taken").PayloadJSONString(`{"n":1}`))
			insert(t, st, stored)
			envs := jsonEvents(t, "batch", at+5)
			envs[at] = build(t, core.NewEvent("Again").ID("taken").PayloadJSONString(`{"n":2}`))
			tx := begin(t, st)
			_, err := insertBatch(t.Context(), st, tx, envs, testLease)
			batchErrorAt(t, err, at, "taken", core.ErrDuplicateEvent)
			after := jsonEvent(t, "after-the-duplicate")
			if _, err := insertBatch(t.Context(), st, tx, []core.Envelope{after}, testLease); err != nil {
				t.Fatalf("the transaction is not usable after the duplicate: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			absent(t, st, append(envs[:at:at], envs[at+1:]...)...)
			sameEnvelope(t, get(t, st, "taken"), stored)
			sameEnvelope(t, get(t, st, after.ID()), after)
		})
	}

	t.Run("OrderedEvents", func(t *testing.T) {
		// Ordered events take consecutive positions per key in slice
		// order; the first event of a free key takes its lease, the later
		// ones of that key (and every event of a held key) wait unowned.
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		publishOrdered(t, st, orderedEvent(t, "held-1", "held", core.BlockOnDead), lease, false)
		envs := []core.Envelope{
			orderedEvent(t, "k-1", "k", core.BlockOnDead),
			jsonEvent(t, "plain-1"),
			orderedEvent(t, "k-2", "k", core.SkipOnDead),
			orderedEvent(t, "held-2", "held", core.BlockOnDead),
			orderedEvent(t, "k-3", "k", core.BlockOnDead),
			jsonEvent(t, "plain-2"),
		}
		tx := begin(t, st)
		leased, err := insertBatch(t.Context(), st, tx, envs, lease)
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{true, true, false, false, false, true}; fmt.Sprint(leased) != fmt.Sprint(want) {
			t.Errorf("leased = %v, want %v", leased, want)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct {
			key   string
			seq   int64
			owner string
		}{{"k", 1, "node-a"}, {"", 0, "node-a"}, {"k", 2, ""}, {"held", 2, ""}, {"k", 3, ""}, {"", 0, "node-a"}} {
			r := get(t, st, envs[i].ID())
			if r.OrderKey != want.key || r.OrderSeq != want.seq || r.LockedBy != want.owner {
				t.Errorf("%s: key %q at %d owned by %q, want %q at %d owned by %q",
					r.ID, r.OrderKey, r.OrderSeq, r.LockedBy, want.key, want.seq, want.owner)
			}
		}
		if r := get(t, st, "k-2"); r.OnDead != core.SkipOnDead {
			t.Errorf("k-2: policy %v, want skip", r.OnDead)
		}
		// The key's events are claimed one at a time, in order.
		if n, err := st.MarkDone(t.Context(), "node-a", []string{"k-1"}); err != nil || n != 1 {
			t.Fatalf("MarkDone k-1: %d, %v", n, err)
		}
		clk.Advance(time.Minute)
		var claimed []string
		for _, r := range claimAll(t, st, "node-b", clk.Now()) {
			claimed = append(claimed, r.ID)
		}
		sameIDs(t, "claimed after k-1 is DONE", claimed, []string{"k-2"})
	})

	t.Run("ConcurrentBatchesOnTheSameKeysInOtherOrders", func(t *testing.T) {
		// Batches naming the same keys in different orders, committed
		// concurrently: each takes the keys in key order, so none waits
		// for a key another holds while holding one that other waits for.
		// In slice order, most of them died in deadlocks (an audit: 91 of
		// 120 on MariaDB, 104 of 120 on PostgreSQL).
		if s.h.Dialect.Capabilities().SingleWriter {
			t.Skip("one writer at a time: no row locks to wait for")
		}
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		keys := []string{"dk-1", "dk-2", "dk-3"}
		const writers, txs = 4, 8
		var wg sync.WaitGroup
		errs := make(chan error, writers*txs)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range txs {
					order := slices.Clone(keys)
					if (w+i)%2 == 1 {
						slices.Reverse(order)
					}
					var envs []core.Envelope
					for _, k := range order {
						for e := range 2 {
							env, err := core.NewEvent("Ordered").ID(fmt.Sprintf("dl-%d-%d-%s-%d", w, i, k, e)).OrderKey(k).PayloadJSONString(`{}`).Build()
							if err != nil {
								errs <- err
								return
							}
							envs = append(envs, env)
						}
					}
					tx, err := st.DB().BeginTxx(t.Context(), nil)
					if err != nil {
						errs <- err
						return
					}
					if _, err := insertBatch(t.Context(), st, tx, envs, core.Lease{}); err != nil {
						_ = tx.Rollback()
						errs <- fmt.Errorf("writer %d, batch %d (keys %v): %w", w, i, order, err)
						continue
					}
					if err := tx.Commit(); err != nil {
						errs <- fmt.Errorf("writer %d, batch %d: commit: %w", w, i, err)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Each key's positions run 1..n without a gap or a repeat.
		for _, k := range keys {
			var seqs []int64
			for w := range writers {
				for i := range txs {
					for e := range 2 {
						if r, err := st.Get(t.Context(), fmt.Sprintf("dl-%d-%d-%s-%d", w, i, k, e)); err == nil {
							seqs = append(seqs, r.OrderSeq)
						}
					}
				}
			}
			slices.Sort(seqs)
			for j, seq := range seqs {
				if seq != int64(j+1) {
					t.Fatalf("key %s: positions %v, want 1..%d", k, seqs, len(seqs))
				}
			}
		}
	})

	t.Run("DuplicateAmongOrderedEvents", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		publishOrdered(t, st, orderedEvent(t, "o-taken", "k", core.BlockOnDead), lease, false)
		envs := []core.Envelope{
			jsonEvent(t, "o-plain"),
			orderedEvent(t, "o-new", "k2", core.BlockOnDead),
			orderedEvent(t, "o-taken", "k3", core.BlockOnDead),
		}
		tx := begin(t, st)
		_, err := insertBatch(t.Context(), st, tx, envs, lease)
		batchErrorAt(t, err, 2, "o-taken", core.ErrDuplicateEvent)
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit after the duplicate: %v", err)
		}
		absent(t, st, envs[0], envs[1])
		if r := get(t, st, "o-taken"); r.OrderKey != "k" {
			t.Errorf("the stored event changed: key %q", r.OrderKey)
		}
		// The key whose event was taken back still takes new events.
		if !publishOrdered(t, st, orderedEvent(t, "o-next", "k2", core.BlockOnDead), lease, false) {
			t.Error("the next event of a key whose batch was taken back did not take its lease")
		}
	})

	t.Run("DuplicateTakenBackBeforeTheCommitCheck", func(t *testing.T) {
		// On a transaction that checks before commit that the database
		// did not roll it back (txctx's, on MySQL and MariaDB), a batch
		// taken back after a duplicate leaves no check on its rows: the
		// transaction commits.
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		lease := core.Lease{Owner: "node-a", Until: t0.Add(time.Hour)}
		publishOrdered(t, st, orderedEvent(t, "c-taken", "k", core.BlockOnDead), lease, false)
		envs := []core.Envelope{
			jsonEvent(t, "c-plain"),
			orderedEvent(t, "c-new", "k2", core.BlockOnDead),
			orderedEvent(t, "c-taken", "k3", core.BlockOnDead),
		}
		after := jsonEvent(t, "c-after")
		err := txctx.NewX(st.DB()).Do(t.Context(), func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			_, err := insertBatch(ctx, st, tx, envs, lease)
			batchErrorAt(t, err, 2, "c-taken", core.ErrDuplicateEvent)
			_, err = insertBatch(ctx, st, tx, []core.Envelope{after}, lease)
			return err
		})
		if err != nil {
			t.Fatalf("commit after the batch was taken back: %v", err)
		}
		absent(t, st, envs[0], envs[1])
		sameEnvelope(t, get(t, st, after.ID()), after)
	})

	t.Run("OnTheStoresDatabase", func(t *testing.T) {
		// On the store's own pool the batch runs in a transaction of its
		// own, ordered events included.
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		envs := append(jsonEvents(t, "own", 3), orderedEvent(t, "own-k", "k", core.BlockOnDead))
		leased, err := insertBatch(t.Context(), st, st.DB(), envs, testLease)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(leased) != "[true true true true]" {
			t.Errorf("leased = %v, want all", leased)
		}
		for _, env := range envs {
			get(t, st, env.ID())
		}
		dup := []core.Envelope{jsonEvent(t, "own-new"), envs[1]}
		_, err = insertBatch(t.Context(), st, st.DB().DB, dup, testLease)
		batchErrorAt(t, err, 1, envs[1].ID(), core.ErrDuplicateEvent)
		absent(t, st, dup[0])
	})

	t.Run("OnATransactionThatOnlyExecutes", func(t *testing.T) {
		// A transaction that cannot run queries (only core.Execer): the
		// batch still goes in, a duplicate is still refused and taken
		// back, and ordered events are refused before anything is written.
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		insert(t, st, jsonEvent(t, "x-taken"))
		tx := begin(t, st)
		ex := execOnly{tx}
		envs := jsonEvents(t, "x", 3)
		if _, err := insertBatch(t.Context(), st, ex, envs, testLease); err != nil {
			t.Fatal(err)
		}
		dup := []core.Envelope{jsonEvent(t, "x-new"), jsonEvent(t, "x-taken"), jsonEvent(t, "x-new2")}
		if _, err := insertBatch(t.Context(), st, ex, dup, testLease); !errors.Is(err, core.ErrDuplicateEvent) {
			t.Fatalf("duplicate: err = %v, want ErrDuplicateEvent", err)
		}
		ordered := []core.Envelope{jsonEvent(t, "x-plain"), orderedEvent(t, "x-k", "k", core.BlockOnDead)}
		_, err := insertBatch(t.Context(), st, ex, ordered, testLease)
		batchErrorAt(t, err, 1, "x-k", core.ErrOrderingUnsupported)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, env := range envs {
			sameEnvelope(t, get(t, st, env.ID()), env)
		}
		absent(t, st, dup[0], dup[2], ordered[0], ordered[1])
	})

	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		envs := jsonEvents(t, "cancel", 3)
		if _, err := insertBatch(canceled(t), st, st.DB(), envs, testLease); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		absent(t, st, envs...)
	})
}

// execOnly hides every method of a transaction but ExecContext.
type execOnly struct{ ex core.Execer }

func (e execOnly) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return e.ex.ExecContext(ctx, query, args...)
}
