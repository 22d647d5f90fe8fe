package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/txctx"
)

// deliveries records the events a listener saw, in delivery order.
type deliveries struct {
	mu   sync.Mutex
	ids  []string
	more chan struct{}
}

func newDeliveries() *deliveries { return &deliveries{more: make(chan struct{}, 1)} }

func (d *deliveries) listener(_ context.Context, e outbox.Envelope) error {
	d.mu.Lock()
	d.ids = append(d.ids, e.ID())
	d.mu.Unlock()
	select {
	case d.more <- struct{}{}:
	default:
	}
	return nil
}

// wait returns the ids seen once there are n, failing t after 10 s.
func (d *deliveries) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		d.mu.Lock()
		ids := slices.Clone(d.ids)
		d.mu.Unlock()
		if len(ids) >= n {
			return ids
		}
		select {
		case <-d.more:
		case <-deadline:
			t.Fatalf("timed out: %d of %d events delivered", len(ids), n)
		}
	}
}

// batchEvents builds n events of type "E" with ids prefix-0, …; every
// third one (from the second) of the key prefix, ordered, with a seq
// header.
func batchEvents(t *testing.T, prefix string, n int) []outbox.Envelope {
	t.Helper()
	envs := make([]outbox.Envelope, n)
	for i := range envs {
		b := outbox.NewEvent("E").ID(fmt.Sprintf("%s-%d", prefix, i)).Header("seq", strconv.Itoa(i)).
			PayloadJSONString(`{"i":` + strconv.Itoa(i) + `}`)
		if i%3 == 1 {
			b = b.OrderKey(prefix)
		}
		env, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		envs[i] = env
	}
	return envs
}

// PublishAll on every database: one transaction's events, ordered ones
// among them, all delivered (the ordered ones in order), the unordered
// and the first ordered one by the hot path; a rollback delivers none; an
// invalid or duplicate event leaves nothing of the batch.
func TestPublishAll(t *testing.T) {
	for name, open := range testDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t, "publishall.db")
			ctx := context.Background()
			ob, err := outbox.New(ctx, db, outbox.Config{Logger: quietLogger(), Poller: pollerFast()})
			if err != nil {
				t.Fatal(err)
			}
			seen := newDeliveries()
			ob.RegisterFunc("E", seen.listener)
			if err := ob.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ob.Close(context.Background()) })
			owner := parts.Outbox(ob).Dispatcher.Owner()

			envs := batchEvents(t, "batch", 10)
			var ids []string
			err = ob.InTx(ctx, func(ctx context.Context) error {
				var err error
				ids, err = ob.PublishAll(ctx, envs...)
				if err != nil {
					return err
				}
				tx, _ := txctx.From(ctx)
				for i, env := range envs {
					want := owner
					if env.OrderKey() != "" && i > 1 {
						want = "" // behind the key's first event
					}
					if got := lockedBy(t, tx, db, env.ID()); got != want {
						t.Errorf("%s leased to %q, want %q", env.ID(), got, want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, env := range envs {
				if ids[i] != env.ID() {
					t.Fatalf("ids = %q, want the events' ids in order", ids)
				}
			}
			got := seen.wait(t, len(envs))
			var keyed []string
			for _, id := range got {
				if i := slices.IndexFunc(envs, func(e outbox.Envelope) bool { return e.ID() == id }); envs[i].OrderKey() != "" {
					keyed = append(keyed, id)
				}
			}
			sameList(t, "ordered events delivered", keyed, []string{"batch-1", "batch-4", "batch-7"})
			for _, env := range envs {
				rec, err := ob.Get(ctx, env.ID())
				if err != nil || rec.OrderKey != env.OrderKey() {
					t.Errorf("%s: %v, key %q", env.ID(), err, rec.OrderKey)
				}
			}

			t.Run("rollback", func(t *testing.T) {
				envs := batchEvents(t, "rolled-back", 4)
				boom := errors.New("boom")
				err := ob.InTx(ctx, func(ctx context.Context) error {
					if _, err := ob.PublishAll(ctx, envs...); err != nil {
						return err
					}
					return boom
				})
				if !errors.Is(err, boom) {
					t.Fatal(err)
				}
				for _, env := range envs {
					if _, err := ob.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
						t.Fatalf("%s after rollback: Get = %v, want ErrNotFound", env.ID(), err)
					}
				}
			})

			t.Run("bad events", func(t *testing.T) {
				fresh := batchEvents(t, "fresh", 3)
				err := ob.InTx(ctx, func(ctx context.Context) error {
					_, err := ob.PublishAll(ctx, fresh[0], outbox.Envelope{}, fresh[2])
					var be *core.BatchError
					if !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, core.ErrEmptyEventType) {
						t.Errorf("invalid event: err = %v, want a BatchError at 1", err)
					}
					_, err = ob.PublishAll(ctx, fresh[0], envs[3], fresh[2]) // envs[3] is stored
					if !errors.As(err, &be) || be.Index != 1 || be.ID != envs[3].ID() || !errors.Is(err, core.ErrDuplicateEvent) {
						t.Errorf("stored id: err = %v, want a BatchError at 1 wrapping ErrDuplicateEvent", err)
					}
					// A stored id among ordered events, after the
					// unordered ones went in: those are taken back too.
					keyed := mustBuild(t, outbox.NewEvent("E").ID("fresh-keyed").OrderKey("fresh").PayloadJSONString(`{}`))
					_, err = ob.PublishAll(ctx, fresh[0], keyed, envs[1]) // envs[1] is stored and ordered
					if !errors.As(err, &be) || be.Index != 2 || be.ID != envs[1].ID() || !errors.Is(err, core.ErrDuplicateEvent) {
						t.Errorf("stored ordered id: err = %v, want a BatchError at 2 wrapping ErrDuplicateEvent", err)
					}
					if _, err := ob.Get(ctx, keyed.ID()); !errors.Is(err, core.ErrNotFound) {
						t.Errorf("%s: Get = %v, want ErrNotFound", keyed.ID(), err)
					}
					// The transaction goes on, without any of them, and
					// commits.
					_, err = ob.Publish(ctx, fresh[1])
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, env := range []outbox.Envelope{fresh[0], fresh[2]} {
					if _, err := ob.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
						t.Errorf("%s: Get = %v, want ErrNotFound", env.ID(), err)
					}
				}
				seen.wait(t, len(envs)+1)
			})

			t.Run("plain transaction", func(t *testing.T) {
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				envs := batchEvents(t, "plain", 3)
				if _, err := ob.PublishAllTx(ctx, tx, envs...); err != nil {
					_ = tx.Rollback()
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				seen.wait(t, 10+1+3) // delivered by the poller
			})
		})
	}
}

func sameList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

// A batch on another outbox's transaction is refused, leaving that
// transaction usable; on MySQL a batch whose transaction the server
// rolled back (a killed connection, the error swallowed) fails the commit
// and reaches no listener.
func TestPublishAllTransactionSafety(t *testing.T) {
	for name, open := range testDatabases {
		t.Run(name+" foreign transaction", func(t *testing.T) {
			dbA, dbB := open(t, "a.db"), open(t, "b.db")
			var seenA, seenB atomic.Int64
			obA, _ := startOutbox(t, dbA, &seenA)
			obB, mB := startOutbox(t, dbB, &seenB)
			ctx := context.Background()
			var foreignErr error
			err := obA.InTx(ctx, func(ctx context.Context) error {
				_, foreignErr = obB.PublishAll(ctx, batchEvents(t, "foreign", 3)...)
				_, err := obA.PublishAll(ctx, batchEvents(t, "own", 2)...)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(foreignErr, core.ErrForeignTx) {
				t.Fatalf("obB.PublishAll with obA's transaction = %v, want ErrForeignTx", foreignErr)
			}
			if a, b := countRows(t, dbA), countRows(t, dbB); a != 2 || b != 0 || mB.Hot.Load() != 0 {
				t.Fatalf("A holds %d events, B %d (hot %d); want 2, 0, 0", a, b, mB.Hot.Load())
			}
		})
	}
	t.Run("mysql killed connection", func(t *testing.T) {
		db := testdb.MySQL(t)
		var seen atomic.Int64
		ob, m := startOutbox(t, db, &seen)
		ctx := context.Background()
		var stmtErr error
		err := ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if _, err := ob.PublishAll(ctx, batchEvents(t, "killed", 4)...); err != nil {
				return err
			}
			var connID int64
			if err := tx.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&connID); err != nil {
				return err
			}
			if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", connID)); err != nil {
				return err
			}
			_, stmtErr = tx.ExecContext(ctx, `SELECT 1`)
			return nil // swallowed
		})
		if stmtErr == nil || err == nil {
			t.Fatalf("statement error %v, InTx %v: want both to fail on a killed connection", stmtErr, err)
		}
		if n := m.Hot.Load(); n != 0 {
			t.Fatalf("%d events reached the hot path", n)
		}
		if n := countRows(t, db); n != 0 {
			t.Fatalf("outbox holds %d rows, want 0", n)
		}
	})
}

// TestPublishAllRefusesJSONTheColumnRefusesMySQLPostgres: an ordered
// event whose valid JSON the database's column would refuse (MariaDB's
// 32 levels of nesting, jsonb's \u0000) fails PublishAll with a
// *core.BatchError wrapping core.ErrInvalidJSON before anything is
// written, wherever it stands in the batch: the transaction stays usable
// and commits none of the batch's events.
func TestPublishAllRefusesJSONTheColumnRefusesMySQLPostgres(t *testing.T) {
	refused := map[string]string{
		"mysql":    strings.Repeat("[", 40) + strings.Repeat("]", 40),
		"postgres": `{"s":"\u0000"}`,
	}
	for name, payload := range refused {
		for _, ordered := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s ordered=%v", name, ordered), func(t *testing.T) {
				db := testDatabases[name](t, "")
				var seen atomic.Int64
				ob, _ := startOutbox(t, db, &seen)
				b := outbox.NewEvent("E").PayloadJSONString(payload)
				if ordered {
					b = b.OrderKey("k")
				}
				bad := mustBuild(t, b)
				envs := []outbox.Envelope{mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`)), bad,
					mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`))}
				var batchErr error
				err := ob.InTx(context.Background(), func(ctx context.Context) error {
					_, batchErr = ob.PublishAll(ctx, envs...)
					return nil // the refusal leaves the transaction usable: commit it
				})
				if err != nil {
					t.Fatalf("commit after the refused batch: %v", err)
				}
				var be *core.BatchError
				if !errors.As(batchErr, &be) || be.Index != 1 || !errors.Is(batchErr, core.ErrInvalidJSON) {
					t.Fatalf("PublishAll = %v, want a *core.BatchError at 1 wrapping ErrInvalidJSON", batchErr)
				}
				if n := countRows(t, db); n != 0 {
					t.Fatalf("the refused batch left %d rows committed, want 0", n)
				}
			})
		}
	}
}
