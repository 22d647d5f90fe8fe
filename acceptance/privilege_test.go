package acceptance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/txctx"
)

// runLeastPrivilege runs the whole framework on udb, a pool of an account
// that holds nothing but SELECT, INSERT, UPDATE and DELETE on the outbox
// table (already deployed by another account: SkipSchema) and on a
// business table orders (id, note): publishing in a business transaction,
// the hot path's DONE write, a failing listener's RETRY and DEAD writes,
// the poller's claim of events dropped by a full hot queue (SELECT … FOR
// UPDATE SKIP LOCKED, or UPDATE … RETURNING), the reaping of an expired
// lease and the retention purge. Nothing it logs is a privilege error.
func runLeastPrivilege(t *testing.T, udb *sqlx.DB) {
	t.Helper()
	ctx := context.Background()
	logs := &testsupport.LogBuffer{}
	m := &testsupport.Metrics{}
	cfg := outbox.Config{SkipSchema: true, Logger: logs.Logger(), Metrics: m}
	cfg.Dispatcher.Workers = 1
	cfg.Dispatcher.HotCapacity = 1
	cfg.Dispatcher.MaxAttempts = 2
	cfg.Dispatcher.Retry = fixedRetry(10 * time.Millisecond)
	cfg.Poller.Interval = time.Hour // the test drives PollOnce and ReapOnce
	cfg.Poller.SkipRecent = -1
	ob, err := outbox.New(ctx, udb, cfg)
	if err != nil {
		t.Fatalf("New with SkipSchema as the least-privilege account: %v", err)
	}
	f := &fixture{ob: ob, metrics: m, db: udb}

	var mu sync.Mutex
	delivered := map[string]int{}
	record := func(id string) {
		mu.Lock()
		delivered[id]++
		mu.Unlock()
	}
	ob.RegisterFunc("Paid", func(_ context.Context, e core.Envelope) error { record(e.ID()); return nil })
	// Refund fails every time; its second attempt waits until the test
	// has seen the RETRY row.
	var refundCalls atomic.Int64
	refundSecond := make(chan struct{})
	ob.RegisterFunc("Refund", func(context.Context, core.Envelope) error {
		if refundCalls.Add(1) == 2 {
			<-refundSecond
		}
		return errors.New("payment provider unavailable")
	})
	// Bulk holds the only worker on its first event until gate closes.
	entered := make(chan string, 8)
	gate := make(chan struct{})
	ob.RegisterFunc("Bulk", func(_ context.Context, e core.Envelope) error {
		select {
		case entered <- e.ID():
		default: // only the first one is waited for
		}
		<-gate
		record(e.ID())
		return nil
	})
	ob.RegisterFunc("Reaped", func(_ context.Context, e core.Envelope) error { record(e.ID()); return nil })
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := ob.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})

	insertOrder := udb.Rebind(`INSERT INTO orders (id, note) VALUES (?, ?)`)
	publish := func(envs ...core.Envelope) {
		t.Helper()
		err := ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			for _, env := range envs {
				if _, err := tx.ExecContext(ctx, insertOrder, env.ID(), env.Type()); err != nil {
					return err
				}
				if _, err := ob.Publish(ctx, env); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("publish as the least-privilege account: %v", err)
		}
	}

	t.Run("HotPathDone", func(t *testing.T) {
		env := mustEvent(t, core.NewEvent("Paid").AggregateType("Order").AggregateID("1").PayloadJSONString(`{"total":12}`))
		publish(env)
		rec := f.waitStatus(t, env.ID(), core.StatusDone)
		if rec.LockedBy != "" || rec.DoneAt.IsZero() {
			t.Errorf("DONE row: locked_by %q, done_at %v", rec.LockedBy, rec.DoneAt)
		}
	})

	t.Run("RetryThenDead", func(t *testing.T) {
		env := mustEvent(t, core.NewEvent("Refund").PayloadJSONString(`{}`))
		publish(env)
		rec := f.waitStatus(t, env.ID(), core.StatusRetry)
		if rec.Attempts != 1 || rec.LastError == "" || rec.LockedBy != parts.Outbox(ob).Dispatcher.Owner() {
			t.Errorf("RETRY row: attempts %d, last_error %q, locked_by %q", rec.Attempts, rec.LastError, rec.LockedBy)
		}
		close(refundSecond)
		rec = f.waitStatus(t, env.ID(), core.StatusDead)
		if rec.Attempts != 2 || rec.LastError == "" || rec.LockedBy != "" {
			t.Errorf("DEAD row: attempts %d, last_error %q, locked_by %q", rec.Attempts, rec.LastError, rec.LockedBy)
		}
	})

	t.Run("HotQueueOverflowClaimedByPoller", func(t *testing.T) {
		first := mustEvent(t, core.NewEvent("Bulk").PayloadJSONString(`{"n":0}`))
		publish(first)
		<-entered // the only worker is busy
		var rest []core.Envelope
		for i := 1; i <= 3; i++ {
			rest = append(rest, mustEvent(t, core.NewEvent("Bulk").PayloadJSONString(fmt.Sprintf(`{"n":%d}`, i))))
		}
		dropped := m.Dropped.Load()
		publish(rest...) // one fits the hot queue, two are dropped
		if d := m.Dropped.Load() - dropped; d != 2 {
			t.Fatalf("HotDropped = %d, want 2", d)
		}
		close(gate)
		all := append([]core.Envelope{first}, rest...)
		cold := m.Cold.Load()
		waitFor(t, "the poller to claim and deliver the dropped events", func() bool {
			if _, err := parts.Outbox(ob).Poller.PollOnce(ctx); err != nil {
				t.Fatalf("PollOnce as the least-privilege account: %v", err)
			}
			for _, e := range all {
				if f.status(t, e.ID()).Status != core.StatusDone {
					return false
				}
			}
			return true
		})
		if c := m.Cold.Load() - cold; c < 2 {
			t.Errorf("ColdEnqueued = %d, want at least the 2 dropped events", c)
		}
	})

	t.Run("ReapExpiredLease", func(t *testing.T) {
		// A row leased by a node that died a minute ago.
		env := mustEvent(t, core.NewEvent("Reaped").PayloadJSONString(`{}`))
		crashed := core.Lease{Owner: "crashed-node", Until: time.Now().Add(-time.Minute)}
		if err := parts.Outbox(ob).Store.Insert(ctx, udb, env, crashed); err != nil {
			t.Fatalf("Insert as the least-privilege account: %v", err)
		}
		n, err := parts.Outbox(ob).Poller.ReapOnce(ctx)
		if err != nil {
			t.Fatalf("ReapOnce as the least-privilege account: %v", err)
		}
		if n != 1 {
			t.Fatalf("ReapOnce released %d leases, want 1", n)
		}
		if rec := f.status(t, env.ID()); rec.LockedBy != "" || !rec.LockedUntil.IsZero() || rec.Status != core.StatusNew {
			t.Fatalf("reaped row: status %v, locked_by %q, locked_until %v", rec.Status, rec.LockedBy, rec.LockedUntil)
		}
		waitFor(t, "the reaped event to be claimed and delivered", func() bool {
			if _, err := parts.Outbox(ob).Poller.PollOnce(ctx); err != nil {
				t.Fatalf("PollOnce: %v", err)
			}
			return f.status(t, env.ID()).Status == core.StatusDone
		})
	})

	t.Run("CleanupPurgesFinishedRows", func(t *testing.T) {
		// Every row is DONE or DEAD by now: a purge with a retention of
		// a nanosecond deletes them all.
		c, err := cleanup.New(parts.Outbox(ob).Store, cleanup.Config{
			DoneRetention: time.Nanosecond, DeadRetention: time.Nanosecond, BatchSize: 2, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.RunOnce(ctx)
		if err != nil {
			t.Fatalf("cleanup as the least-privilege account: %v", err)
		}
		if res.Done < 4 || res.Dead != 1 {
			t.Errorf("purged %d DONE and %d DEAD rows, want every DONE row and the DEAD one", res.Done, res.Dead)
		}
		counts, err := ob.CountByStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for st, n := range counts {
			if n != 0 {
				t.Errorf("%d %v rows left after the purge", n, st)
			}
		}
	})

	if n := logs.Count("level=ERROR"); n != 1 || logs.Count("level=ERROR", "event is DEAD") != 1 {
		t.Errorf("ERROR lines: %q, want only the DEAD event's", logs.Lines("level=ERROR"))
	}
	if n := logs.Count("denied"); n != 0 {
		t.Errorf("privilege errors logged: %q", logs.Lines("denied"))
	}
}

// deployForLeastPrivilege is the deployment, by the database owner: the
// outbox schema and the business table orders (id, note).
func deployForLeastPrivilege(t *testing.T, root *sqlx.DB) {
	t.Helper()
	ctx := context.Background()
	store, err := jdbcstore.New(root, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := root.ExecContext(ctx, `CREATE TABLE orders (id VARCHAR(64) NOT NULL PRIMARY KEY, note VARCHAR(64) NULL)`); err != nil {
		t.Fatal(err)
	}
}
