package inbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/txctx"
)

// A database that rolls the transaction back on its own and lets the
// connection carry on in autocommit mode (MySQL/MariaDB after a deadlock,
// SQLite after some I/O errors): fn ignored the failed statement and
// returns nil. The Done mark must not be written in autocommit mode:
// ProcessTx returns an error wrapping core.ErrTxAborted and the message
// keeps the state it had. A ROLLBACK statement on the transaction leaves
// the connection in that same state on every database. The clock stands
// still, so the delivery writes the time the row already holds: the mark
// must still tell this transaction's write from the committed row.
func testProcessTxAfterSilentRollback(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE effects (id INTEGER NOT NULL PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(e.ctx, `INSERT INTO effects (id, n) VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.in.AlreadyProcessed(e.ctx, "s", "seen", nil); err != nil { // a dedupe check came first
		t.Fatal(err)
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "queued"})
	for _, c := range []struct {
		id   string
		want inbox.Status // -1: no row
	}{{"seen", inbox.StatusSeen}, {"queued", inbox.StatusProcessing}, {"new", -1}} {
		tx, err := e.db.BeginTxx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.in.ProcessTx(e.ctx, tx, inbox.Message{Source: "s", MessageID: c.id}, func(ctx context.Context) error {
			if _, err := tx.ExecContext(ctx, `UPDATE effects SET n = n + 1 WHERE id = 1`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `ROLLBACK`) // what the server did
			return err
		})
		_ = tx.Rollback()
		if p || !errors.Is(err, core.ErrTxAborted) {
			t.Errorf("%s: ProcessTx after the rollback = %v, %v; want an error wrapping core.ErrTxAborted", c.id, p, err)
		}
		mustEqual(t, c.id+" status", e.status("s", c.id), c.want)
	}
	var n int
	if err := e.db.QueryRowContext(e.ctx, `SELECT n FROM effects WHERE id = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "effects", n, 0)
	// A delivery that goes through is marked as before.
	if p, err := e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "seen"}, func(context.Context, *sqlx.Tx) error { return nil }); err != nil || !p {
		t.Fatalf("next delivery = %v, %v", p, err)
	}
	mustEqual(t, "status", e.status("s", "seen"), inbox.StatusDone)
}

// deadlock sets up two transactions, each of which adds one to an effect
// row, locks a row of its own, waits for the other to do the same (arrive)
// and then asks for the other's row: the database picks one as the
// deadlock victim.
type deadlock struct {
	t       *testing.T
	e       *env
	barrier sync.WaitGroup
	both    chan struct{}
}

func newDeadlock(t *testing.T, e *env) *deadlock {
	for _, q := range []string{`CREATE TABLE acct (id INT PRIMARY KEY, n INT NOT NULL)`,
		`INSERT INTO acct (id, n) VALUES (1, 0), (2, 0), (3, 0), (4, 0)`} {
		if _, err := e.db.ExecContext(e.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	d := &deadlock{t: t, e: e, both: make(chan struct{})}
	d.barrier.Add(2)
	go func() { d.barrier.Wait(); close(d.both) }()
	return d
}

// bump adds one to row id on tx.
func (d *deadlock) bump(ctx context.Context, tx inbox.Tx, id int) error {
	_, err := tx.ExecContext(ctx, d.e.db.Rebind(`UPDATE acct SET n = n + 1 WHERE id = ?`), id)
	return err
}

// arrive waits until both transactions hold their first row.
func (d *deadlock) arrive() {
	d.barrier.Done()
	select {
	case <-d.both:
	case <-time.After(waitTimeout):
		d.t.Error("the other transaction never took its first lock")
	}
}

// effect returns the value of row id.
func (d *deadlock) effect(id int) int {
	var n int
	if err := d.e.db.GetContext(d.e.ctx, &n, d.e.db.Rebind(`SELECT n FROM acct WHERE id = ?`), id); err != nil {
		d.t.Fatal(err)
	}
	return n
}

type victimResult struct {
	id        string
	effectRow int
	processed bool
	err       error // ProcessTx's, or the commit's
	swallowed error
}

// processBoth runs ProcessTx for m1 (effect row 3, locks 1 then 2) and m2
// (effect row 4, locks 2 then 1), each on a transaction of its own, fn
// swallowing the error of its second lock; it commits when ProcessTx
// succeeds.
func (d *deadlock) processBoth() []victimResult {
	out := make(chan victimResult, 2)
	run := func(id string, first, second, effect int) {
		r := victimResult{id: id, effectRow: effect}
		defer func() { out <- r }()
		arrived := false
		defer func() {
			if !arrived {
				d.arrive()
			}
		}()
		tx, err := d.e.db.BeginTxx(d.e.ctx, nil)
		if err != nil {
			r.err = err
			return
		}
		defer tx.Rollback() //nolint:errcheck
		r.processed, r.err = d.e.in.ProcessTx(d.e.ctx, tx, inbox.Message{Source: "s", MessageID: id}, func(ctx context.Context) error {
			if err := d.bump(ctx, tx, effect); err != nil {
				return err
			}
			if err := d.bump(ctx, tx, first); err != nil {
				return err
			}
			arrived = true
			d.arrive()
			r.swallowed = d.bump(ctx, tx, second) // a best-effort statistic
			return nil
		})
		if r.err == nil {
			r.err = tx.Commit()
		}
	}
	go run("m1", 1, 2, 3)
	go run("m2", 2, 1, 4)
	return []victimResult{<-out, <-out}
}

// Both messages were seen before (a dedupe check, a Dead message retried
// by hand, …), so each has a row the victim's Done mark could hit in
// autocommit mode.
func seenBefore(t *testing.T, e *env, ids ...string) {
	for _, id := range ids {
		if _, err := e.in.AlreadyProcessed(e.ctx, "s", id, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// On MySQL/MariaDB the deadlock victim's transaction is rolled back by the
// server and its connection carries on in autocommit mode: fn swallowed
// the error and returned nil, and ProcessTx used to mark the message Done
// in autocommit, so it stayed Done with its effect never committed. Now
// the victim gets core.ErrTxAborted and its message keeps its state.
func TestProcessTxDeadlockVictimMySQL(t *testing.T) {
	testdb.MySQLDSN(t)
	testDeadlockVictim(t, openMySQL, func(t *testing.T, err error) {
		if !errors.Is(err, core.ErrTxAborted) {
			t.Errorf("victim's ProcessTx: %v; want an error wrapping core.ErrTxAborted", err)
		}
	})
}

// On PostgreSQL the victim's transaction is aborted and refuses every
// later statement, the Done mark included: the victim gets an error and
// its message keeps its state, as before.
func TestProcessTxDeadlockVictimPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	testDeadlockVictim(t, openPostgres, func(*testing.T, error) {})
}

func testDeadlockVictim(t *testing.T, open opener, checkErr func(*testing.T, error)) {
	e := newEnv(t, open, inbox.Config{})
	seenBefore(t, e, "m1", "m2")
	d := newDeadlock(t, e)
	victims := 0
	for _, r := range d.processBoth() {
		st, n := e.status("s", r.id), d.effect(r.effectRow)
		t.Logf("%s: processed=%v err=%v swallowed=%v; status %v, effect %d", r.id, r.processed, r.err, r.swallowed, st, n)
		if r.swallowed == nil {
			if r.err != nil || !r.processed || st != inbox.StatusDone || n != 1 {
				t.Errorf("%s (not the victim): processed=%v err=%v, status %v, effect %d; want processed, Done, 1", r.id, r.processed, r.err, st, n)
			}
			continue
		}
		victims++
		if r.err == nil || r.processed {
			t.Errorf("%s (the victim): processed=%v err=%v; want an error", r.id, r.processed, r.err)
		}
		checkErr(t, r.err)
		if st != inbox.StatusSeen || n != 0 {
			t.Errorf("%s (the victim): status %v, effect %d; want Seen, 0", r.id, st, n)
		}
	}
	mustEqual(t, "deadlock victims", victims, 1)
}

// The victim's deadlock comes after ProcessTx, later in a txctx
// transaction (a core.CommitChecker): the server rolled back the Done mark
// with the rest, and the commit must fail with core.ErrTxAborted instead
// of "succeeding" on nothing.
func TestCommitAfterSilentRollbackMySQL(t *testing.T) {
	testdb.MySQLDSN(t)
	e := newEnv(t, openMySQL, inbox.Config{})
	d := newDeadlock(t, e)
	mgr := txctx.NewX(e.db)
	out := make(chan victimResult, 2)
	run := func(id string, first, second, effect int) {
		r := victimResult{id: id, effectRow: effect}
		defer func() { out <- r }()
		arrived := false
		defer func() {
			if !arrived {
				d.arrive()
			}
		}()
		r.err = mgr.Do(e.ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			var err error
			r.processed, err = e.in.ProcessTx(ctx, tx, inbox.Message{Source: "s", MessageID: id}, func(ctx context.Context) error {
				return d.bump(ctx, tx, effect)
			})
			if err != nil {
				return err
			}
			if err := d.bump(ctx, tx, first); err != nil {
				return err
			}
			arrived = true
			d.arrive()
			r.swallowed = d.bump(ctx, tx, second)
			return nil
		})
	}
	go run("m1", 1, 2, 3)
	go run("m2", 2, 1, 4)
	victims := 0
	for range 2 {
		r := <-out
		st, n := e.status("s", r.id), d.effect(r.effectRow)
		t.Logf("%s: processed=%v err=%v swallowed=%v; status %v, effect %d", r.id, r.processed, r.err, r.swallowed, st, n)
		if r.swallowed == nil {
			if r.err != nil || st != inbox.StatusDone || n != 1 {
				t.Errorf("%s (not the victim): err=%v, status %v, effect %d; want committed, Done, 1", r.id, r.err, st, n)
			}
			continue
		}
		victims++
		if !errors.Is(r.err, core.ErrTxAborted) {
			t.Errorf("%s (the victim): commit: %v; want an error wrapping core.ErrTxAborted", r.id, r.err)
		}
		if st != -1 || n != 0 {
			t.Errorf("%s (the victim): status %v, effect %d; want no row, 0", r.id, st, n)
		}
	}
	mustEqual(t, "deadlock victims", victims, 1)
}
