package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/txctx"
)

// startOutbox builds and starts an outbox on db whose listener counts the
// events of type "E" it sees.
func startOutbox(t *testing.T, db *sqlx.DB, seen *atomic.Int64) (*outbox.Outbox, *testsupport.Metrics) {
	t.Helper()
	m := &testsupport.Metrics{}
	ob, err := outbox.New(context.Background(), db, outbox.Config{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ob.RegisterFunc("E", func(context.Context, outbox.Envelope) error { seen.Add(1); return nil })
	startUntilCleanup(t, ob)
	return ob, m
}

func countRows(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT COUNT(*) FROM outbox_event`); err != nil {
		t.Fatal(err)
	}
	return n
}

func sqliteDB(t *testing.T, name string) *sqlx.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestPublishRefusesAnotherOutboxTransaction(t *testing.T) {
	for name, open := range map[string]func(t *testing.T, name string) *sqlx.DB{
		"sqlite":   sqliteDB,
		"mysql":    func(t *testing.T, _ string) *sqlx.DB { return testdb.MySQL(t) },
		"postgres": func(t *testing.T, _ string) *sqlx.DB { return testdb.Postgres(t) },
	} {
		t.Run(name, func(t *testing.T) {
			dbA, dbB := open(t, "a.db"), open(t, "b.db")
			var seenA, seenB atomic.Int64
			obA, _ := startOutbox(t, dbA, &seenA)
			obB, mB := startOutbox(t, dbB, &seenB)
			ctx := context.Background()

			var foreignErr error
			err := obA.InTx(ctx, func(ctx context.Context) error {
				env, err := outbox.NewEvent("E").PayloadJSONString(`{}`).Build()
				if err != nil {
					return err
				}
				_, foreignErr = obB.Publish(ctx, env) // A's transaction, B's outbox
				// The refusal leaves A's transaction usable.
				_, err = obA.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`)))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(foreignErr, core.ErrForeignTx) || !errors.Is(foreignErr, txctx.ErrForeignTx) {
				t.Fatalf("obB.Publish with obA's transaction = %v, want ErrForeignTx", foreignErr)
			}
			if n := countRows(t, dbA); n != 1 {
				t.Fatalf("A's table holds %d events, want 1 (only A's own)", n)
			}
			if n := countRows(t, dbB); n != 0 {
				t.Fatalf("B's table holds %d events, want 0", n)
			}
			if mB.Hot.Load() != 0 {
				t.Fatal("B's hot path got an event")
			}
		})
	}
}

func mustBuild(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestNoPhantomAfterServerRollbackMySQL: InnoDB rolls back the whole
// transaction after a deadlock and a killed connection; business code that
// ignores the failed statement and returns nil must get an error from the
// commit, and no listener may see the event whose row never committed.
func TestNoPhantomAfterServerRollbackMySQL(t *testing.T) {
	for _, via := range []string{"txctx methods", "txctx QueryRow", "raw sqlx handle", "adopted tx",
		"txctx methods, publish after", "raw sqlx handle, publish after"} {
		t.Run("deadlock via "+via, func(t *testing.T) { testDeadlockSwallowed(t, via) })
	}

	t.Run("killed connection", func(t *testing.T) {
		db := testdb.MySQL(t)
		var seen atomic.Int64
		ob, m := startOutbox(t, db, &seen)
		ctx := context.Background()
		var stmtErr error
		err := ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if _, err := ob.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`))); err != nil {
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
		if stmtErr == nil {
			t.Fatal("a statement on the killed connection succeeded")
		}
		if err == nil {
			t.Fatal("InTx succeeded on a killed connection")
		}
		if n := m.Hot.Load(); n != 0 {
			t.Fatalf("%d events reached the hot path from a transaction on a killed connection", n)
		}
		if n := countRows(t, db); n != 0 {
			t.Fatalf("outbox holds %d rows, want 0", n)
		}
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.WaitFor(t, 20*time.Second, what, cond)
}

// testDeadlockSwallowed makes the business transaction the victim of a
// deadlock, swallows the error and commits: the commit must fail with
// ErrTxAborted and the event must reach no listener. via says how the
// business code runs its statements: through txctx.Tx's own methods, on the
// raw handle from Sqlx(), or on a transaction it began itself and adopted.
func testDeadlockSwallowed(t *testing.T, via string) {
	db := testdb.MySQL(t)
	var seen atomic.Int64
	ob, m := startOutbox(t, db, &seen)
	ctx := context.Background()
	db.MustExec(`CREATE TABLE acct (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`)
	db.MustExec(`CREATE TABLE heavy (id INT AUTO_INCREMENT PRIMARY KEY, pad INT) ENGINE=InnoDB`)
	db.MustExec(`INSERT INTO acct VALUES (1, 0), (2, 0), (3, 0)`)

	// The other transaction writes many rows first, so InnoDB picks the
	// lighter business transaction as the deadlock victim.
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherTx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for i := range 300 {
		vals = append(vals, fmt.Sprintf("(%d)", i))
	}
	if _, err := otherTx.ExecContext(ctx, `INSERT INTO heavy (pad) VALUES `+strings.Join(vals, ",")); err != nil {
		t.Fatal(err)
	}
	if _, err := otherTx.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	holds1 := make(chan struct{})
	otherDone := make(chan error, 1)
	go func() {
		<-holds1
		// Waits for the business transaction's lock on row 1; with the
		// business transaction waiting for row 2, InnoDB sees the cycle.
		_, err := otherTx.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = 1`)
		if err == nil {
			err = otherTx.Commit()
		}
		otherDone <- err
	}()

	var id string
	var deadlock, lateErr error
	publishLate := strings.HasSuffix(via, "publish after")
	business := func(ctx context.Context, ex interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}) error {
		if _, err := ex.ExecContext(ctx, `SET SESSION innodb_lock_wait_timeout = 20`); err != nil {
			return err
		}
		if publishLate {
			defer func() {
				// After the ignored deadlock: the server ended the
				// transaction, so the insert would commit on its own.
				_, lateErr = ob.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`)))
			}()
		} else {
			var err error
			if id, err = ob.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`))); err != nil {
				return err
			}
		}
		if _, err := ex.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = 1`); err != nil {
			return err
		}
		close(holds1)
		if q, ok := ex.(interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		}); ok && via == "txctx QueryRow" {
			// A locking read of several rows: row 3 is locked and sent,
			// then row 2 deadlocks, so the error comes at Scan, not with
			// the query.
			var v int
			deadlock = q.QueryRowContext(ctx, `SELECT v FROM acct WHERE id >= 2 ORDER BY id DESC FOR UPDATE`).Scan(&v)
			return nil
		}
		_, deadlock = ex.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = 2`)
		return nil // the business code swallows the deadlock
	}
	switch via {
	case "txctx methods", "txctx QueryRow", "txctx methods, publish after":
		err = ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			return business(ctx, tx)
		})
	case "raw sqlx handle", "raw sqlx handle, publish after":
		err = ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			return business(ctx, tx.Sqlx())
		})
	case "adopted tx":
		x, berr := db.BeginTxx(ctx, nil)
		if berr != nil {
			t.Fatal(berr)
		}
		actx, tx := ob.AdoptX(ctx, x)
		if err = business(actx, x); err == nil {
			err = tx.Commit()
		}
	}
	if e := <-otherDone; e != nil {
		t.Fatalf("the other transaction failed: %v (want the business transaction to be the victim)", e)
	}
	if deadlock == nil || !strings.Contains(deadlock.Error(), "1213") {
		t.Fatalf("the business statement did not deadlock: %v", deadlock)
	}
	if publishLate {
		// MariaDB tells the transaction ended (@@in_transaction): the
		// publish is refused and nothing is written. MySQL cannot tell.
		if !errors.Is(lateErr, core.ErrTxAborted) {
			t.Fatalf("Publish after the ignored deadlock = %v, want ErrTxAborted", lateErr)
		}
	} else {
		requireAborted(t, err, ob, m, id)
	}
	if n := countRows(t, db); n != 0 {
		t.Fatalf("outbox holds %d rows, want 0", n)
	}
	// The outbox goes on working.
	if err := ob.InTx(ctx, func(ctx context.Context) error {
		_, err := ob.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the next event delivered", func() bool { return seen.Load() == 1 })
}

// TestNoPhantomAfterLockWaitTimeoutRollbackMySQL: with
// innodb_rollback_on_timeout (a server option, so on a private server) a
// lock wait timeout rolls back the whole transaction; swallowing it must
// not let the commit succeed or the event reach a listener.
func TestNoPhantomAfterLockWaitTimeoutRollbackMySQL(t *testing.T) {
	srv := testdb.StartMariaDB(t, "--innodb-rollback-on-timeout=ON", "--innodb-lock-wait-timeout=1")
	db := srv.Open()
	var seen atomic.Int64
	ob, m := startOutbox(t, db, &seen)
	ctx := context.Background()
	db.MustExec(`CREATE TABLE acct (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`)
	db.MustExec(`INSERT INTO acct VALUES (1, 0)`)

	holder, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	var id string
	var timeout error
	err = ob.InTx(ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		var err error
		if id, err = ob.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`))); err != nil {
			return err
		}
		_, timeout = tx.ExecContext(ctx, `UPDATE acct SET v = v + 1 WHERE id = 1`)
		return nil // swallowed
	})
	if timeout == nil || !strings.Contains(timeout.Error(), "1205") {
		t.Fatalf("the business statement did not time out: %v", timeout)
	}
	requireAborted(t, err, ob, m, id)
}

// requireAborted checks the outcome of a commit the database had already
// rolled back: ErrTxAborted, nothing handed to the hot path, no row for id.
func requireAborted(t *testing.T, commitErr error, ob *outbox.Outbox, m *testsupport.Metrics, id string) {
	t.Helper()
	if !errors.Is(commitErr, core.ErrTxAborted) {
		t.Fatalf("commit = %v, want ErrTxAborted", commitErr)
	}
	if n := m.Hot.Load(); n != 0 {
		t.Fatalf("%d events reached the hot path from a rolled-back transaction", n)
	}
	if _, err := ob.Get(context.Background(), id); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("Get(%s) after the rollback = %v, want ErrNotFound", id, err)
	}
}

// TestCommitCheckOnlyAfterAFailedStatementMySQL: the check before commit
// costs a read, so it runs only when a statement of the transaction failed
// (or ran out of txctx's sight); so do, on MariaDB, the check that the
// transaction is still open before an event joins it (SELECT
// @@in_transaction), and the read after commit of which events are
// stored. Counted with the connection's own
// Com_select on a pool of one connection and an outbox that is not
// started (no poller or dispatcher statements in between).
func TestCommitCheckOnlyAfterAFailedStatementMySQL(t *testing.T) {
	db := testdb.MySQL(t)
	db.SetMaxOpenConns(1)
	ob, err := outbox.New(context.Background(), db, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	ctx := context.Background()
	selects := func() int {
		var name string
		var n int
		if err := db.QueryRowxContext(ctx, `SHOW SESSION STATUS LIKE 'Com_select'`).Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var version string
	if err := db.GetContext(ctx, &version, `SELECT VERSION()`); err != nil {
		t.Fatal(err)
	}
	afterFailure := 2 // the check before commit, the read after it of which events are stored
	if strings.Contains(version, "MariaDB") {
		afterFailure = 3 // and the check before the insert
	}
	for _, tc := range []struct {
		name      string
		failFirst bool
		want      int
	}{
		{"every statement succeeded", false, 0},
		{"a statement failed", true, afterFailure},
	} {
		before := selects()
		err := ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if tc.failFirst {
				_, _ = tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`) // fails, ignored
			}
			_, err := ob.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`)))
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// SHOW STATUS counts as Com_show_status, not as a SELECT.
		if got := selects() - before; got != tc.want {
			t.Errorf("%s: %d SELECTs in the transaction, want %d", tc.name, got, tc.want)
		}
	}
}

// TestPublishRefusesAnotherDatabasesTransactionMySQL: a MySQL/MariaDB
// outbox given a transaction of another kind of database (an outbox on
// PostgreSQL or SQLite), after a statement that txctx could not watch
// (so its check that the transaction is still open would run), refuses
// it with ErrForeignTx before any statement: the foreign transaction stays
// usable and commits its own event, and the MariaDB outbox still refuses
// an event on a transaction the server has ended (its open check was not
// turned off by the foreign database's "no such column" answer).
func TestPublishRefusesAnotherDatabasesTransactionMySQL(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) *sqlx.DB{
		"postgres": func(t *testing.T) *sqlx.DB { return testdb.Postgres(t) },
		"sqlite":   func(t *testing.T) *sqlx.DB { return sqliteDB(t, "foreign.db") },
	} {
		for _, via := range []string{"InTx after a query", "adopted"} {
			t.Run(name+", "+via, func(t *testing.T) {
				ctx := context.Background()
				mdb := testdb.MySQL(t)
				var seenM, seenF atomic.Int64
				obM, mM := startOutbox(t, mdb, &seenM)
				fdb := open(t)
				obF, _ := startOutbox(t, fdb, &seenF)

				var foreignErr error
				work := func(ctx context.Context) error {
					tx, _ := txctx.From(ctx)
					rows, err := tx.QueryContext(ctx, `SELECT 1`) // out of txctx's sight
					if err != nil {
						return err
					}
					_ = rows.Close()
					_, foreignErr = obM.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`)))
					_, err = obF.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`)))
					return err
				}
				var err error
				if via == "adopted" {
					raw, berr := fdb.BeginTx(ctx, nil)
					if berr != nil {
						t.Fatal(berr)
					}
					actx, tx := obF.Adopt(ctx, raw)
					if err = work(actx); err == nil {
						err = tx.Commit()
					} else {
						_ = tx.Rollback()
					}
				} else {
					err = obF.InTx(ctx, work)
				}
				if !errors.Is(foreignErr, core.ErrForeignTx) {
					t.Fatalf("the MySQL outbox's Publish on a %s transaction = %v, want ErrForeignTx", name, foreignErr)
				}
				if err != nil {
					t.Fatalf("the %s transaction failed after the refused publish: %v", name, err)
				}
				waitUntil(t, "the "+name+" event delivered", func() bool { return seenF.Load() == 1 })
				if n := countRows(t, mdb); n != 0 {
					t.Fatalf("the MySQL outbox holds %d rows, want 0", n)
				}

				var version string
				if err := mdb.GetContext(ctx, &version, `SELECT VERSION()`); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(version, "MariaDB") {
					return // MySQL has no open check to keep
				}
				// A transaction the server has ended (as after an ignored
				// deadlock): statements after it autocommit.
				raw, err := mdb.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				actx, tx := obM.Adopt(ctx, raw)
				rows, err := tx.QueryContext(actx, `SELECT 1`) // unwatched: the check runs
				if err != nil {
					t.Fatal(err)
				}
				_ = rows.Close()
				if _, err := raw.ExecContext(ctx, `COMMIT`); err != nil {
					t.Fatal(err)
				}
				id := mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`))
				_, perr := obM.Publish(actx, id)
				_ = tx.Rollback()
				requireAborted(t, perr, obM, mM, id.ID())
			})
		}
	}
}

// TestNoPhantomPublishTxOnAPlainTxMariaDB: a plain *sql.Tx (PublishTx, no
// txctx watching its statements) that MariaDB has already ended (as after
// a deadlock the code ignored: the session then runs in autocommit mode)
// gets its Publish refused with ErrTxAborted, and no row commits on its
// own: the store asks whether the transaction is open whenever it cannot
// tell that every statement succeeded.
func TestNoPhantomPublishTxOnAPlainTxMariaDB(t *testing.T) {
	db := testdb.MySQL(t)
	ctx := context.Background()
	var version string
	if err := db.GetContext(ctx, &version, `SELECT VERSION()`); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "MariaDB") {
		t.Skip("MySQL has no @@in_transaction to ask (README: MySQL / MariaDB)")
	}
	var seen atomic.Int64
	ob, m := startOutbox(t, db, &seen)
	for _, via := range []string{"*sql.Tx", "*sqlx.Tx"} {
		t.Run(via, func(t *testing.T) {
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, `COMMIT`); err != nil { // the server ends it
				t.Fatal(err)
			}
			env := mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`))
			var perr error
			if via == "*sql.Tx" {
				_, perr = ob.PublishTx(ctx, tx.Tx, env)
			} else {
				_, perr = ob.PublishTx(ctx, tx, env)
			}
			_ = tx.Rollback()
			requireAborted(t, perr, ob, m, env.ID())
		})
	}
}

// TestNoPhantomAfterAProcedureRollbackMySQL: a stored procedure whose
// exit handler rolls the transaction back (the common DECLARE EXIT
// HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; END) returns success, so no
// statement failed and no statement said "rollback": the commit
// "succeeded" on nothing and the event, whose row never existed, was
// delivered. So did the same call inside MariaDB's compound statements
// and executable comments. A statement that is not one plain statement
// (txctx's runsUnseen) runs code txctx cannot see, so the transaction is
// checked before commit as after a failed statement.
func TestNoPhantomAfterAProcedureRollbackMySQL(t *testing.T) {
	db := testdb.MySQL(t)
	var version string
	if err := db.Get(&version, `SELECT VERSION()`); err != nil {
		t.Fatal(err)
	}
	stmts := []string{"CALL add_acct(1)", "/*!CALL add_acct(1)*/", "\vCALL add_acct(1)"}
	if strings.Contains(version, "MariaDB") {
		stmts = append(stmts, "BEGIN NOT ATOMIC CALL add_acct(1); END", "IF 1 THEN CALL add_acct(1); END IF",
			"/*M!CALL add_acct(1)*/")
	}
	var seen atomic.Int64
	ob, m := startOutbox(t, db, &seen)
	db.MustExec(`CREATE TABLE acct (id INT PRIMARY KEY) ENGINE=InnoDB`)
	db.MustExec(`INSERT INTO acct VALUES (1)`)
	t.Cleanup(func() { _, _ = db.Exec(`DROP PROCEDURE IF EXISTS add_acct`) })
	db.MustExec(`CREATE PROCEDURE add_acct(IN n INT)
BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; END;
  INSERT INTO acct VALUES (n);
END`)
	for _, stmt := range stmts {
		id, err := publishThen(t, ob, func(ctx context.Context, tx *txctx.Tx, _ string) error {
			_, err := tx.ExecContext(ctx, stmt) // a duplicate key: the handler rolls back
			return err
		})
		t.Logf("%q: %v", stmt, err)
		requireAborted(t, err, ob, m, id)
	}
}

// publishThen publishes an event of type E in an InTx of ob, then runs
// then on the transaction with the event's id; it returns the id and
// InTx's error.
func publishThen(t *testing.T, ob *outbox.Outbox, then func(ctx context.Context, tx *txctx.Tx, id string) error) (string, error) {
	t.Helper()
	var id string
	err := ob.InTx(context.Background(), func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		var err error
		if id, err = ob.Publish(ctx, mustBuild(t, outbox.NewEvent("E").PayloadJSONString(`{}`))); err != nil {
			return err
		}
		return then(ctx, tx, id)
	})
	return id, err
}

// TestNoPhantomWhenTheFirstEventVanishesUnseenMySQL: the check before
// commit took a first event gone from a transaction still open for a
// rollback to a savepoint, and let the commit go on, even when the
// transaction had run no statement that could roll back to one: after a
// deadlock met reading a query's rows (which txctx does not see), a
// MariaDB session's SET autocommit = 0 begins another transaction, and
// the event, without a row, was delivered. Simulated here by removing
// the row with a plain statement after a query.
func TestNoPhantomWhenTheFirstEventVanishesUnseenMySQL(t *testing.T) {
	db := testdb.MySQL(t)
	var seen atomic.Int64
	ob, m := startOutbox(t, db, &seen)
	id, err := publishThen(t, ob, func(ctx context.Context, tx *txctx.Tx, id string) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil { // its rows' errors unseen
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM outbox_event WHERE event_id = ?`, id)
		return err
	})
	requireAborted(t, err, ob, m, id)
}

// TestNoPhantomAfterAnImplicitCommitMySQL: MySQL/MariaDB commit the
// transaction before DDL (or SET autocommit = 1), so its first event is
// stored whatever follows; a rollback hidden later in the session (a
// deadlock met reading a query's rows, which txctx does not see) then
// removed only the events published after it, which the check before
// commit, looking at the first event, could not see, and they were
// delivered. Simulated here by removing the later row with a plain
// statement after a query.
func TestNoPhantomAfterAnImplicitCommitMySQL(t *testing.T) {
	db := testdb.MySQL(t)
	cfg := outbox.Config{}
	cfg.Dispatcher.Workers = 1
	cfg.Poller.Interval = time.Hour
	ob, seen := newDelivering(t, db, cfg)
	ctx := context.Background()
	// A first event may come any time after its round (by the poller: a
	// poll delayed on a loaded machine finds it in the next round); a
	// later event, without a row, never.
	allowed, phantoms := map[string]bool{}, map[string]bool{}
	for i, commits := range []string{`CREATE TABLE implicit_commit (id INT)`, `SET autocommit = 1`} {
		first, later := event(t), event(t)
		allowed[first.ID()], phantoms[later.ID()] = true, true
		err := ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if _, err := ob.Publish(ctx, first); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, commits); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `SET autocommit = 0`); err != nil { // a transaction again
				return err
			}
			// Refused on MariaDB (ErrTxAborted: the transaction it
			// began with was committed); MySQL cannot tell.
			if _, err := ob.Publish(ctx, later); err != nil {
				return err
			}
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM outbox_event WHERE event_id = ?`, later.ID())
			return err
		})
		if err != nil && !errors.Is(err, core.ErrTxAborted) {
			t.Fatalf("%s: InTx = %v, want nil or ErrTxAborted", commits, err)
		}
		// The first event, stored, is delivered on the hot path when
		// InTx committed, else later by the poller.
		kept := event(t)
		allowed[kept.ID()] = true
		if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, kept); return err }); err != nil {
			t.Fatal(err)
		}
		for got := ""; got != kept.ID(); {
			switch got = testsupport.Recv(t, 30*time.Second, seen, "a delivery"); {
			case phantoms[got]:
				t.Fatalf("%s (%d): %s delivered, which has no row", commits, i, got)
			case !allowed[got]:
				t.Fatalf("%s (%d): delivered %s, an event of no round", commits, i, got)
			}
		}
	}
}
