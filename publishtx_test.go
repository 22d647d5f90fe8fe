package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/txctx"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// pollerFast polls every few milliseconds and skips no recent row, so a
// test sees the poller's deliveries at once.
func pollerFast() poller.Config {
	return poller.Config{Interval: 5 * time.Millisecond, SkipRecent: -1}
}

func waitSignal[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

var testDatabases = map[string]func(t *testing.T, name string) *sqlx.DB{
	"sqlite":   sqliteDB,
	"mysql":    func(t *testing.T, _ string) *sqlx.DB { return testdb.MySQL(t) },
	"postgres": func(t *testing.T, _ string) *sqlx.DB { return testdb.Postgres(t) },
}

// newDelivering builds and starts an outbox on db (a *sql.DB or *sqlx.DB)
// whose listener of "E" reports the ids it sees.
func newDelivering[DB *sql.DB | *sqlx.DB](t *testing.T, db DB, cfg outbox.Config) (*outbox.Outbox, chan string) {
	t.Helper()
	cfg.Logger = quietLogger()
	ob, err := outbox.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 16)
	ob.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error { seen <- e.ID(); return nil })
	startUntilCleanup(t, ob)
	return ob, seen
}

// startUntilCleanup starts ob and closes it when t ends (within 10 s),
// reporting a failed Close.
func startUntilCleanup(t *testing.T, ob *outbox.Outbox) {
	t.Helper()
	if err := ob.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ob.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func event(t *testing.T) outbox.Envelope {
	t.Helper()
	env, err := outbox.JSONEvent("E", `{"n":1}`)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// lockedBy returns the lease holder of the event row id, read on q.
func lockedBy(t *testing.T, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, db *sqlx.DB, id string) string {
	t.Helper()
	var owner sql.NullString
	if err := q.QueryRowContext(context.Background(), db.Rebind(`SELECT locked_by FROM outbox_event WHERE event_id = ?`), id).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	return owner.String
}

// PublishTx on every kind of transaction: plain ones are delivered by the
// poller (inserted unowned), txctx's by the hot path; a rollback leaves
// nothing.
func TestPublishTx(t *testing.T) {
	for name, open := range testDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t, "publishtx.db")
			ctx := context.Background()
			// New takes the *sql.DB the application has.
			ob, seen := newDelivering(t, db.DB, outbox.Config{Poller: pollerFast()})
			plain := map[string]func() (outbox.Tx, error){
				"sql.Tx":  func() (outbox.Tx, error) { return db.DB.BeginTx(ctx, nil) },
				"sqlx.Tx": func() (outbox.Tx, error) { return db.BeginTxx(ctx, nil) },
			}
			for kind, begin := range plain {
				t.Run(kind+" rollback", func(t *testing.T) {
					tx, err := begin()
					if err != nil {
						t.Fatal(err)
					}
					env := event(t)
					if _, err := ob.PublishTx(ctx, tx, env); err != nil {
						t.Fatal(err)
					}
					if err := tx.Rollback(); err != nil {
						t.Fatal(err)
					}
					if _, err := ob.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
						t.Fatalf("after rollback: Get = %v, want ErrNotFound", err)
					}
				})
				t.Run(kind+" commit", func(t *testing.T) {
					tx, err := begin()
					if err != nil {
						t.Fatal(err)
					}
					env := event(t)
					id, err := ob.PublishTx(ctx, tx, env)
					if err != nil || id != env.ID() {
						t.Fatalf("PublishTx = %q, %v", id, err)
					}
					if owner := lockedBy(t, tx.(interface {
						QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
					}), db, id); owner != "" {
						t.Fatalf("plain tx: row leased to %q, want unowned", owner)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					if got := waitSignal(t, seen, "poller delivery"); got != id {
						t.Fatalf("delivered %s, want %s", got, id)
					}
				})
			}
			t.Run("nil", func(t *testing.T) {
				for _, tx := range []outbox.Tx{nil, (*sql.Tx)(nil), (*sqlx.Tx)(nil), (*txctx.Tx)(nil)} {
					if _, err := ob.PublishTx(ctx, tx, event(t)); !errors.Is(err, core.ErrNoTransaction) {
						t.Errorf("PublishTx(%T nil) = %v, want ErrNoTransaction", tx, err)
					}
				}
			})
		})
	}
}

// A txctx.Tx committed through it takes the hot path: delivered with the
// poller off.
func TestPublishTxHotPath(t *testing.T) {
	for name, open := range testDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t, "hot.db")
			ctx := context.Background()
			ob, seen := newDelivering(t, db, outbox.Config{DisablePoller: true})
			t.Run("InTx", func(t *testing.T) {
				env := event(t)
				err := ob.InTx(ctx, func(ctx context.Context) error {
					tx, _ := txctx.From(ctx)
					_, err := ob.PublishTx(ctx, tx, env)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := waitSignal(t, seen, "hot delivery"); got != env.ID() {
					t.Fatalf("delivered %s, want %s", got, env.ID())
				}
			})
			t.Run("adopted", func(t *testing.T) {
				raw, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, tx := ob.Adopt(ctx, raw)
				env := event(t)
				if _, err := ob.PublishTx(ctx, tx, env); err != nil {
					t.Fatal(err)
				}
				if owner := lockedBy(t, tx, db, env.ID()); owner != parts.Outbox(ob).Dispatcher.Owner() {
					t.Fatalf("txctx tx: row leased to %q, want this node %q", owner, parts.Outbox(ob).Dispatcher.Owner())
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if got := waitSignal(t, seen, "hot delivery"); got != env.ID() {
					t.Fatalf("delivered %s, want %s", got, env.ID())
				}
			})
			t.Run("rollback", func(t *testing.T) {
				env := event(t)
				boom := errors.New("boom")
				err := ob.InTx(ctx, func(ctx context.Context) error {
					tx, _ := txctx.From(ctx)
					if _, err := ob.PublishTx(ctx, tx, env); err != nil {
						return err
					}
					return boom
				})
				if !errors.Is(err, boom) {
					t.Fatal(err)
				}
				if _, err := ob.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
					t.Fatalf("after rollback: Get = %v, want ErrNotFound", err)
				}
			})
		})
	}
}

// A transaction already committed or rolled back is no transaction for
// every publishing entry point: the error matches core.ErrNoTransaction,
// as for a finished *txctx.Tx, and still sql.ErrTxDone (a plain *sql.Tx or
// *sqlx.Tx, or one adopted after it ended, returned an error matching
// sql.ErrTxDone only). Nothing is written.
func TestPublishOnAFinishedTransaction(t *testing.T) {
	for dbName, open := range testDatabases {
		t.Run(dbName, func(t *testing.T) {
			ctx := context.Background()
			db := open(t, "finished.db")
			ob, err := outbox.New(ctx, db, outbox.Config{DisablePoller: true, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			finished := func(commit bool) *sqlx.Tx {
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if commit {
					err = tx.Commit()
				} else {
					err = tx.Rollback()
				}
				if err != nil {
					t.Fatal(err)
				}
				return tx
			}
			ordered := func() outbox.Envelope {
				return mustBuild(t, outbox.NewEvent("E").OrderKey("k").PayloadJSONString(`{}`))
			}
			for _, tc := range []struct {
				name    string
				publish func(envs ...outbox.Envelope) error
			}{
				{"PublishTx, committed *sql.Tx", func(envs ...outbox.Envelope) error {
					_, err := ob.PublishTx(ctx, finished(true).Tx, envs[0])
					return err
				}},
				{"PublishTx, rolled back *sqlx.Tx", func(envs ...outbox.Envelope) error {
					_, err := ob.PublishTx(ctx, finished(false), envs[0])
					return err
				}},
				{"PublishAllTx, committed *sql.Tx", func(envs ...outbox.Envelope) error {
					_, err := ob.PublishAllTx(ctx, finished(true).Tx, envs...)
					return err
				}},
				{"Publish, adopted after commit", func(envs ...outbox.Envelope) error {
					actx, _ := ob.Adopt(ctx, finished(true).Tx)
					_, err := ob.Publish(actx, envs[0])
					return err
				}},
				{"PublishAll, adopted after rollback", func(envs ...outbox.Envelope) error {
					actx, _ := ob.AdoptX(ctx, finished(false))
					_, err := ob.PublishAll(actx, envs...)
					return err
				}},
			} {
				for _, order := range []bool{false, true} {
					envs := []outbox.Envelope{event(t), event(t)}
					if order {
						envs = []outbox.Envelope{ordered(), ordered()}
					}
					err := tc.publish(envs...)
					if !errors.Is(err, core.ErrNoTransaction) || !errors.Is(err, sql.ErrTxDone) {
						t.Errorf("%s (ordered %v) = %v, want ErrNoTransaction and sql.ErrTxDone", tc.name, order, err)
					}
					// The statement never reached the database: nothing
					// to roll back (PostgreSQL's note said so).
					if err != nil && strings.Contains(err.Error(), "roll it back") {
						t.Errorf("%s (ordered %v) = %v: says to roll back a transaction that has ended", tc.name, order, err)
					}
					for _, env := range envs {
						if _, err := ob.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
							t.Errorf("%s (ordered %v): Get = %v, want ErrNotFound", tc.name, order, err)
						}
					}
				}
			}
		})
	}
}
