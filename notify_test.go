package outbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
)

// notifyNodes opens two nodes on one PostgreSQL table: A publishes with
// its poller off (so no listener, and plain transactions insert
// unowned rows), B delivers with a poller whose interval is an hour, so
// only a notification can make it deliver in time. B's connections carry
// the application name appName.
func notifyNodes(t *testing.T, appName string) (a *outbox.Outbox, dbA *sqlx.DB, delivered <-chan string, logs *testsupport.LogBuffer) {
	t.Helper()
	dsn := testdb.PostgresSchemaDSN(t)
	dbA = testdb.OpenPostgres(t, dsn)
	dbB := testdb.OpenPostgres(t, testdb.WithPostgresParam(t, dsn, "application_name", appName))
	a, _ = newDelivering(t, dbA, outbox.Config{DisablePoller: true})
	logger, logs := testsupport.NewLogger()
	b, err := outbox.New(context.Background(), dbB, outbox.Config{Logger: logger,
		Poller: poller.Config{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 16)
	b.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error { seen <- e.ID(); return nil })
	startUntilCleanup(t, b)
	return a, dbA, seen, logs
}

// publishPlain publishes one event on a plain *sql.Tx of db and returns
// its id and when the commit returned.
func publishPlain(t *testing.T, a *outbox.Outbox, db *sqlx.DB) (string, time.Time) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.PublishTx(ctx, tx, event(t))
	if err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id, time.Now()
}

// An event committed on node A through a plain *sql.Tx (no hot path)
// reaches node B's listener within milliseconds: B's poller, resting for
// an hour, is woken by PostgreSQL's NOTIFY. The latency from commit to
// listener is logged (no timed assertion beyond a generous deadline).
func TestNotifyWakesAnotherNodePostgres(t *testing.T) {
	a, dbA, delivered, _ := notifyNodes(t, "outbox-notify-"+randomHex(t))
	const n = 100
	lat := make([]time.Duration, 0, n)
	for range n {
		id, committed := publishPlain(t, a, dbA)
		got := testsupport.Recv(t, 10*time.Second, delivered, "node B's delivery of "+id)
		lat = append(lat, time.Since(committed))
		if got != id {
			t.Fatalf("delivered %s, want %s", got, id)
		}
	}
	slices.Sort(lat)
	t.Logf("commit on A -> listener on B, %d events: p50 %v, p99 %v, max %v", n,
		lat[n/2].Round(time.Microsecond), lat[n*99/100-1].Round(time.Microsecond), lat[n-1].Round(time.Microsecond))
}

// When PostgreSQL ends the listener's connection (pg_terminate_backend on
// it alone), the listener logs the incident once, reconnects and logs the
// recovery, and notifications wake the poller again.
func TestNotifyListenerReconnectsPostgres(t *testing.T) {
	app := "outbox-notify-" + randomHex(t)
	a, dbA, delivered, logs := notifyNodes(t, app)
	id, _ := publishPlain(t, a, dbA)
	if got := testsupport.Recv(t, 10*time.Second, delivered, "first delivery"); got != id {
		t.Fatalf("delivered %s, want %s", got, id)
	}
	admin := testdb.OpenPostgres(t, testdb.PostgresDSN(t))
	for round := 1; round <= 2; round++ {
		var killed int
		err := admin.GetContext(t.Context(), &killed, `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN %') k`, app)
		if err != nil || killed != 1 {
			t.Fatalf("round %d: terminated %d listener backends, %v; want 1", round, killed, err)
		}
		testsupport.WaitFor(t, 10*time.Second, "the listener's recovery", func() bool {
			return logs.Count("notification listener recovered") == round
		})
		id, _ := publishPlain(t, a, dbA)
		if got := testsupport.Recv(t, 10*time.Second, delivered, "delivery after the reconnect"); got != id {
			t.Fatalf("round %d: delivered %s, want %s", round, got, id)
		}
	}
	if n := logs.Count("level=WARN", "notification listener lost its connection"); n != 2 {
		t.Errorf("%d WARN lines about the lost connection, want one per incident (2):\n%s", n, logs.String())
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// A pool of one connection is not listened on (the way to run without
// the listener's connection): the outbox still works (the poller
// delivers) and the log says why nothing listens.
func TestNotifyNotWithOneConnectionPostgres(t *testing.T) {
	db := testdb.Postgres(t)
	db.SetMaxOpenConns(1)
	logger, logs := testsupport.NewLogger()
	ob, err := outbox.New(context.Background(), db, outbox.Config{Logger: logger,
		Poller: poller.Config{Interval: 5 * time.Millisecond, SkipRecent: -1}})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1)
	ob.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error { seen <- e.ID(); return nil })
	startUntilCleanup(t, ob)
	testsupport.WaitFor(t, 10*time.Second, "the log line", func() bool { return logs.Count("level=INFO", "not listening") == 1 })
	id, _ := publishPlain(t, ob, db)
	if got := testsupport.Recv(t, 10*time.Second, seen, "the poller's delivery"); got != id {
		t.Fatalf("delivered %s, want %s", got, id)
	}
}

// A replay or a discard made by another process (outboxctl, a dashboard:
// a jdbcstore.Store of their own) wakes the nodes on PostgreSQL, as an
// unowned insert does: the replayed event, and the next event of a key a
// discard released, are delivered at once by a node whose poller rests
// for an hour.
func TestOpsNotifyOtherNodesPostgres(t *testing.T) {
	dsn := testdb.PostgresSchemaDSN(t)
	node := startOpsNode(t, testdb.OpenPostgres(t, dsn))
	ops, err := jdbcstore.New(testdb.OpenPostgres(t, dsn), jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}

	// Replay: event 1 goes DEAD, another process replays it.
	node.publishDead(t, "1")
	if res, err := ops.ReplayDead(t.Context(), jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true}); err != nil || res.Replayed != 1 {
		t.Fatalf("ReplayDead = %+v, %v", res, err)
	}
	node.wantDelivered(t, "1")

	// Discard: event 3 goes DEAD and blocks its key; event 4 waits behind
	// it until another process discards it.
	node.publishDead(t, "3")
	publishOne(t, node.Outbox, "4")
	if res, err := ops.DiscardDead(t.Context(), jdbcstore.DeadFilter{}, jdbcstore.DiscardOptions{All: true}); err != nil || res.Discarded != 1 {
		t.Fatalf("DiscardDead = %+v, %v", res, err)
	}
	node.wantDelivered(t, "4")
}

// The listeners take no connection of the pool: two outboxes (two
// tables) on a pool of two, a database/sql pool or a pgxpool.Pool whose
// limit database/sql cannot see (stdlib.OpenDBFromPool), both publish
// and are both woken by notifications. Each listener held a pool
// connection before: two held both, and every transaction waited for
// ever.
func TestNotifyListenersLeaveThePoolItsConnectionsPostgres(t *testing.T) {
	dsn := testdb.PostgresSchemaDSN(t)
	pools := map[string]func(t *testing.T) *sqlx.DB{
		"sql.DB": func(t *testing.T) *sqlx.DB {
			db := testdb.OpenPostgres(t, dsn)
			db.SetMaxOpenConns(2)
			return db
		},
		"pgxpool": func(t *testing.T) *sqlx.DB {
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 2
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { _ = db.Close() })
			return sqlx.NewDb(db, "pgx")
		},
	}
	for name, open := range pools {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			logger, logs := testsupport.NewLogger()
			seen := make(chan string, 4)
			var obs []*outbox.Outbox
			for _, table := range []string{"outbox_a_" + randomHex(t), "outbox_b_" + randomHex(t)} {
				// The poller rests for an hour: only a notification
				// delivers an event published on a plain transaction.
				ob, err := outbox.New(context.Background(), db, outbox.Config{Logger: logger, Store: jdbcstore.Config{Table: table},
					Poller: poller.Config{Interval: time.Hour}})
				if err != nil {
					t.Fatal(err)
				}
				ob.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error { seen <- e.ID(); return nil })
				startUntilCleanup(t, ob)
				obs = append(obs, ob)
			}
			for i, ob := range obs {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var hot string
				err := ob.InTx(ctx, func(ctx context.Context) error {
					var err error
					hot, err = ob.Publish(ctx, event(t))
					return err
				})
				cancel()
				if err != nil {
					t.Fatalf("publish through outbox %d: %v", i, err)
				}
				if got := testsupport.Recv(t, 10*time.Second, seen, "the hot delivery"); got != hot {
					t.Fatalf("outbox %d delivered %s, want %s", i, got, hot)
				}
				plain, _ := publishPlain(t, ob, db)
				if got := testsupport.Recv(t, 10*time.Second, seen, "the notified delivery"); got != plain {
					t.Fatalf("outbox %d delivered %s, want %s", i, got, plain)
				}
			}
			if n := logs.Count("not listening"); n != 0 {
				t.Errorf("%d 'not listening' lines:\n%s", n, logs.String())
			}
		})
	}
}

// The leases a closing node hands back wake the other nodes on PostgreSQL,
// as the README promises: node B, its poller resting for an hour,
// delivers the events node A published and never delivered as soon as A's
// Close released them. (The release sent no notification: B took them at
// its next timed poll, 16 s later with a 20 s Interval.)
func TestReleasedLeasesWakeAnotherNodePostgres(t *testing.T) {
	app := "outbox-release-" + randomHex(t)
	dsn := testdb.PostgresSchemaDSN(t)
	dbA := testdb.OpenPostgres(t, dsn)
	dbB := testdb.OpenPostgres(t, testdb.WithPostgresParam(t, dsn, "application_name", app))
	a, err := outbox.New(context.Background(), dbA, outbox.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := outbox.New(context.Background(), dbB, outbox.Config{Logger: quietLogger(), Poller: poller.Config{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	delivered := make(chan string, 8)
	b.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error { delivered <- e.ID(); return nil })
	startUntilCleanup(t, b)
	admin := testdb.OpenPostgres(t, testdb.PostgresDSN(t))
	testsupport.WaitFor(t, 10*time.Second, "node B's notification listener", func() bool {
		var n int
		err := admin.GetContext(t.Context(), &n, `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app)
		return err == nil && n == 1
	})

	// A, never started, holds its events leased until its Close.
	want := map[string]bool{}
	for range 3 {
		env := event(t)
		if err := a.InTx(context.Background(), func(ctx context.Context) error { _, err := a.Publish(ctx, env); return err }); err != nil {
			t.Fatal(err)
		}
		want[env.ID()] = true
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range want {
		id := testsupport.Recv(t, 10*time.Second, delivered, "node B's delivery of the events A released")
		if !want[id] {
			t.Fatalf("node B delivered %s, not one of A's", id)
		}
	}
}

// A session idle timeout shorter than the listener's health ping
// (idle_session_timeout, here in the DSN; a role or database setting does
// the same) does not end the notification listener's connection: it
// turns the timeout off for its own session. (Before, PostgreSQL ended the
// connection at every timeout while no notification came: a WARN and a
// "recovered" line each time, 18 pairs in 8 s at 300 ms.)
func TestNotifyListenerOutlivesIdleSessionTimeoutPostgres(t *testing.T) {
	app := "outbox-idle-" + randomHex(t)
	schemaDSN := testdb.PostgresSchemaDSN(t)
	dsn := testdb.WithPostgresParam(t, testdb.WithPostgresParam(t, schemaDSN, "idle_session_timeout", "200"), "application_name", app)
	logger, logs := testsupport.NewLogger()
	db := testdb.OpenPostgres(t, dsn)
	// The pool keeps no idle connection for the server to end: only the
	// listener's session, idle by design, meets the timeout.
	db.SetMaxIdleConns(0)
	ob, err := outbox.New(context.Background(), db, outbox.Config{Logger: logger, Poller: poller.Config{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	delivered := make(chan string, 4)
	ob.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error { delivered <- e.ID(); return nil })
	startUntilCleanup(t, ob)
	admin := testdb.OpenPostgres(t, testdb.PostgresDSN(t))
	// Its session outlives three timeouts while it waits, idle.
	testsupport.WaitFor(t, 10*time.Second, "the listener's session idle for three timeouts", func() bool {
		var n int
		err := admin.GetContext(t.Context(), &n, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN %' AND state = 'idle' AND now() - state_change > interval '600 milliseconds'`, app)
		return err == nil && n == 1
	})
	id, _ := publishPlain(t, ob, testdb.OpenPostgres(t, schemaDSN))
	if got := testsupport.Recv(t, 10*time.Second, delivered, "the delivery woken by the notification"); got != id {
		t.Fatalf("delivered %s, want %s", got, id)
	}
	if n := logs.Count("notification listener lost its connection"); n != 0 {
		t.Errorf("the listener lost its connection %d times while idle:\n%s", n, logs.String())
	}
}
