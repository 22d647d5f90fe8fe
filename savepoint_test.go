package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/txctx"
)

// An event whose row a ROLLBACK TO SAVEPOINT removed is never delivered,
// on every database, whether the rollback ran through the transaction's
// own methods, on its raw *sql.Tx (as an ORM's nested transaction does)
// or on an adopted transaction; the events kept are. It was delivered
// after commit although no row existed (a phantom), and on MariaDB the
// raw-transaction case failed the commit with ErrTxAborted.
func TestSavepointRollbackIsNotDelivered(t *testing.T) {
	for dbName, open := range testDatabases {
		t.Run(dbName, func(t *testing.T) {
			ctx := context.Background()
			db := open(t, "savepoint.db")
			// One worker: the hot queue is delivered in order, so a
			// phantom handed over before the kept event would be seen
			// before it.
			cfg := outbox.Config{}
			cfg.Dispatcher.Workers = 1
			cfg.Poller.Interval = time.Hour
			ob, seen := newDelivering(t, db, cfg)
			for _, tc := range []struct {
				name string
				run  func(t *testing.T, gone, kept []outbox.Envelope) error
			}{
				{"through the Tx", func(t *testing.T, gone, kept []outbox.Envelope) error {
					return ob.InTx(ctx, func(ctx context.Context) error {
						tx, _ := txctx.From(ctx)
						return savepointCase(ctx, ob, tx.ExecContext, gone, kept)
					})
				}},
				{"on the raw transaction", func(t *testing.T, gone, kept []outbox.Envelope) error {
					return ob.InTx(ctx, func(ctx context.Context) error {
						tx, _ := txctx.From(ctx)
						return savepointCase(ctx, ob, tx.SQL().ExecContext, gone, kept)
					})
				}},
				{"on an adopted transaction", func(t *testing.T, gone, kept []outbox.Envelope) error {
					raw, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					actx, tx := ob.Adopt(ctx, raw)
					if err := savepointCase(actx, ob, raw.ExecContext, gone, kept); err != nil {
						_ = tx.Rollback()
						return err
					}
					return tx.Commit()
				}},
			} {
				gone := []outbox.Envelope{event(t), event(t)}
				kept := []outbox.Envelope{event(t), event(t)}
				if err := tc.run(t, gone, kept); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				for _, want := range kept {
					if got := testsupport.Recv(t, 30*time.Second, seen, "a delivery"); got != want.ID() {
						t.Fatalf("%s: delivered %s, want %s (the events rolled back to the savepoint: %s, %s)",
							tc.name, got, want.ID(), gone[0].ID(), gone[1].ID())
					}
				}
				for _, env := range gone {
					if _, err := ob.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
						t.Fatalf("%s: Get(%s) = %v, want ErrNotFound", tc.name, env.ID(), err)
					}
				}
			}
		})
	}
}

// savepointCase publishes gone[0] with Publish and gone[1] with
// PublishAll after a savepoint, rolls back to it with exec, then publishes
// kept the same two ways.
func savepointCase(ctx context.Context, ob *outbox.Outbox, exec func(context.Context, string, ...any) (sql.Result, error), gone, kept []outbox.Envelope) error {
	if _, err := exec(ctx, "SAVEPOINT s1"); err != nil {
		return err
	}
	if _, err := ob.Publish(ctx, gone[0]); err != nil {
		return err
	}
	if _, err := ob.PublishAll(ctx, gone[1]); err != nil {
		return err
	}
	if _, err := exec(ctx, "ROLLBACK TO SAVEPOINT s1"); err != nil {
		return err
	}
	if _, err := ob.Publish(ctx, kept[0]); err != nil {
		return err
	}
	_, err := ob.PublishAll(ctx, kept[1])
	return err
}

// A whole transaction rolled back by a statement run through txctx, then
// "committed" (PostgreSQL commits nothing outside a transaction and only
// warns), delivers nothing: ROLLBACK and PostgreSQL's synonym ABORT. ABORT
// was not watched, so its event reached the listener with no row (a
// phantom).
func TestRollbackStatementIsNotDeliveredPostgres(t *testing.T) {
	ctx := context.Background()
	cfg := outbox.Config{}
	cfg.Dispatcher.Workers = 1
	cfg.Poller.Interval = time.Hour
	ob, seen := newDelivering(t, testdb.Postgres(t), cfg)
	for _, stmt := range []string{"ROLLBACK", "ABORT", "abort transaction"} {
		gone := event(t)
		err := ob.InTx(ctx, func(ctx context.Context) error {
			if _, err := ob.Publish(ctx, gone); err != nil {
				return err
			}
			tx, _ := txctx.From(ctx)
			_, err := tx.ExecContext(ctx, stmt)
			return err
		})
		if err != nil {
			t.Fatalf("%s: InTx = %v", stmt, err)
		}
		kept := event(t)
		if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, kept); return err }); err != nil {
			t.Fatal(err)
		}
		if got := testsupport.Recv(t, 30*time.Second, seen, "a delivery"); got != kept.ID() {
			t.Fatalf("%s: delivered %s, want %s (%s was rolled back)", stmt, got, kept.ID(), gone.ID())
		}
		if _, err := ob.Get(ctx, gone.ID()); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("%s: Get = %v, want ErrNotFound", stmt, err)
		}
	}
}

// PREPARE TRANSACTION detaches the transaction from the session: the
// COMMIT after it only warns, and the event was handed over before the
// prepared transaction was decided (a ROLLBACK PREPARED then left a
// delivered event without a row). Not one plain statement, it makes the
// outbox read after commit which events are stored: none yet, so none is
// handed over.
func TestPrepareTransactionIsNotDeliveredPostgres(t *testing.T) {
	srv := testdb.StartPostgres(t, "max_prepared_transactions=2")
	db := srv.Open()
	ctx := context.Background()
	cfg := outbox.Config{}
	cfg.Dispatcher.Workers = 1
	cfg.Poller.Interval = time.Hour
	ob, seen := newDelivering(t, db, cfg)
	gone := event(t)
	err := ob.InTx(ctx, func(ctx context.Context) error {
		if _, err := ob.Publish(ctx, gone); err != nil {
			return err
		}
		tx, _ := txctx.From(ctx)
		_, err := tx.ExecContext(ctx, "PREPARE TRANSACTION 'outbox_test'")
		return err
	})
	if err != nil {
		t.Fatalf("InTx = %v", err)
	}
	kept := event(t)
	if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, kept); return err }); err != nil {
		t.Fatal(err)
	}
	if got := testsupport.Recv(t, 30*time.Second, seen, "a delivery"); got != kept.ID() {
		t.Fatalf("delivered %s, want %s (%s is in a prepared transaction)", got, kept.ID(), gone.ID())
	}
	db.MustExec("ROLLBACK PREPARED 'outbox_test'")
	if _, err := ob.Get(ctx, gone.ID()); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
}

// requireNotDelivered runs fn, which publishes gone in a transaction that
// the database ends up not keeping it in, then a transaction publishing
// another event: with one worker and no poller, a phantom handed over
// would be delivered before it. fn's InTx error is returned.
func requireNotDelivered(t *testing.T, ob *outbox.Outbox, seen chan string, fn func(gone outbox.Envelope) error) error {
	t.Helper()
	ctx := context.Background()
	gone := event(t)
	err := fn(gone)
	kept := event(t)
	if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, kept); return err }); err != nil {
		t.Fatal(err)
	}
	if got := testsupport.Recv(t, 30*time.Second, seen, "a delivery"); got != kept.ID() {
		t.Fatalf("delivered %s, want %s (%s has no row)", got, kept.ID(), gone.ID())
	}
	if _, err := ob.Get(ctx, gone.ID()); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("Get(%s) = %v, want ErrNotFound", gone.ID(), err)
	}
	return err
}

// deliveringOne is an outbox on db delivering on one worker, without a
// poller in the test's time.
func deliveringOne[DB *sql.DB | *sqlx.DB](t *testing.T, db DB) (*outbox.Outbox, chan string) {
	cfg := outbox.Config{}
	cfg.Dispatcher.Workers = 1
	cfg.Poller.Interval = time.Hour
	return newDelivering(t, db, cfg)
}

// Statements txctx cannot see through may remove an event's row and
// report success; a statement that failed may have ended the
// transaction, and the code going on may begin another. In each case
// the outbox reads after commit which events are stored and hands over
// none of the others. Each was a phantom: a query before the CALL (any
// read makes the transaction one that "may have failed") stopped txctx
// from looking at later statements; MariaDB's SET STATEMENT ... FOR
// passed as a plain SET; PostgreSQL answers a COMMIT in a transaction a
// failed statement aborted with a rollback and no error; SQLite rolls the
// whole transaction back on a constraint declared ON CONFLICT ROLLBACK,
// and a SAVEPOINT after it begins another, which then commits.
func TestHiddenRollbacksAreNotDelivered(t *testing.T) {
	ctx := context.Background()
	t.Run("mysql", func(t *testing.T) {
		db := testdb.MySQL(t)
		var version string
		if err := db.Get(&version, `SELECT VERSION()`); err != nil {
			t.Fatal(err)
		}
		db.MustExec(`CREATE PROCEDURE to_sp() BEGIN ROLLBACK TO SAVEPOINT sp; END`)
		t.Cleanup(func() { _, _ = db.Exec(`DROP PROCEDURE IF EXISTS to_sp`) })
		ob, seen := deliveringOne(t, db)
		stmts := map[string]bool{"CALL to_sp()": true} // statement: read something first
		if strings.Contains(version, "MariaDB") {
			stmts["SET STATEMENT max_statement_time=0 FOR CALL to_sp()"] = false
		}
		for stmt, readFirst := range stmts {
			err := requireNotDelivered(t, ob, seen, func(gone outbox.Envelope) error {
				return ob.InTx(ctx, func(ctx context.Context) error {
					tx, _ := txctx.From(ctx)
					if readFirst {
						var one int
						if err := tx.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
							return err
						}
					}
					if _, err := tx.ExecContext(ctx, `SAVEPOINT sp`); err != nil {
						return err
					}
					if _, err := ob.Publish(ctx, gone); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, stmt)
					return err
				})
			})
			if err != nil {
				t.Errorf("%s: InTx = %v, want nil (the transaction goes on past its savepoint)", stmt, err)
			}
		}
	})
	t.Run("postgres", func(t *testing.T) {
		ob, seen := deliveringOne(t, testdb.Postgres(t))
		for _, stmt := range []string{"COMMIT", "END", "COMMIT AND CHAIN"} {
			_ = requireNotDelivered(t, ob, seen, func(gone outbox.Envelope) error {
				return ob.InTx(ctx, func(ctx context.Context) error {
					if _, err := ob.Publish(ctx, gone); err != nil {
						return err
					}
					tx, _ := txctx.From(ctx)
					_, _ = tx.ExecContext(ctx, `SELECT 1/0`) // fails, ignored
					_, err := tx.ExecContext(ctx, stmt)
					return err
				})
			})
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		db := sqliteDB(t, "hidden.db")
		db.MustExec(`CREATE TABLE uniq (id INTEGER UNIQUE ON CONFLICT ROLLBACK)`)
		db.MustExec(`INSERT INTO uniq VALUES (1)`)
		db.MustExec(`CREATE TABLE pos (n INTEGER)`)
		db.MustExec(`CREATE TRIGGER pos_only BEFORE INSERT ON pos WHEN NEW.n < 0 BEGIN SELECT RAISE(ROLLBACK, 'negative'); END`)
		ob, seen := deliveringOne(t, db)
		for name, fail := range map[string]func(ctx context.Context, tx *txctx.Tx){
			"exec": func(ctx context.Context, tx *txctx.Tx) {
				_, _ = tx.ExecContext(ctx, `INSERT INTO uniq VALUES (1)`)
			},
			"query row": func(ctx context.Context, tx *txctx.Tx) { // an ORM's INSERT ... RETURNING
				var n int
				_ = tx.QueryRowContext(ctx, `INSERT INTO pos VALUES (-1) RETURNING n`).Scan(&n)
			},
		} {
			err := requireNotDelivered(t, ob, seen, func(gone outbox.Envelope) error {
				return ob.InTx(ctx, func(ctx context.Context) error {
					if _, err := ob.Publish(ctx, gone); err != nil {
						return err
					}
					tx, _ := txctx.From(ctx)
					fail(ctx, tx)                                 // rolls the transaction back, ignored
					_, err := tx.ExecContext(ctx, `SAVEPOINT s1`) // an ORM's nested transaction: begins another
					return err
				})
			})
			t.Logf("%s: InTx = %v", name, err)
		}
	})
}
