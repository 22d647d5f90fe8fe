package postgres

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore"
)

// The notification listener's timing.
const (
	// listenMinBackoff and listenMaxBackoff bound the wait before a new
	// connection after a lost one (doubling, with jitter).
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
	// listenHealthInterval is how long the listener waits for a
	// notification before it checks its connection with a ping: a
	// connection dropped without a reset would otherwise stay silent.
	listenHealthInterval = 30 * time.Second
	// listenPingTimeout bounds that check and the final UNLISTEN.
	listenPingTimeout = 5 * time.Second
)

// errNotPgx: the handle's connections are not pgx's database/sql
// connections (a wrapping driver), so they cannot listen.
var errNotPgx = errors.New("the database/sql connections are not github.com/jackc/pgx/v5/stdlib connections")

// NotifyStatement announces a new event of table on the channel named
// like the table: SELECT pg_notify(table, ”). PostgreSQL delivers it
// when the transaction commits, once per transaction however many events
// it announced (identical notifications are merged).
func (pgDialect) NotifyStatement(table string) (string, []any) {
	return "SELECT pg_notify(?, '')", []any{table}
}

// Listen holds one connection of db's pool (taken with db.Conn, so it
// uses the pool's credentials and TLS settings; the pool has one
// connection less while the outbox runs, and Listen does not listen when
// that would leave the pool no connection: a pool of one, or one whose
// other connections the listeners of other outboxes hold) and LISTENs on the channel of table through
// pgx's connection, calling wake for every notification. Pinging it after
// listenHealthInterval of silence detects a dead connection; a lost one
// is replaced with backoff (100 ms doubling to 5 s). It logs a lost
// connection once per incident (Warn) and the recovery (Info).
func (pgDialect) Listen(ctx context.Context, db *sqlx.DB, table string, log *slog.Logger, wake func()) {
	held, ok := holdListener(db.DB)
	if !ok {
		// The listener would hold the last connection the pool allows
		// (the only one, or the last the listeners of other outboxes on
		// the pool left) forever: every transaction would wait for it.
		log.WarnContext(ctx, "outbox: postgres: not listening for notifications: the pool would have no connection left (SetMaxOpenConns); new events wait for the poller's interval",
			slog.String("table", table), slog.Int("max_open_connections", db.Stats().MaxOpenConnections),
			slog.Int("other_listeners", held))
		return
	}
	defer releaseListener(db.DB)
	backoff := listenMinBackoff
	failing := false
	for ctx.Err() == nil {
		err := listenOnce(ctx, db, table, wake, func() {
			if failing {
				failing = false
				log.InfoContext(ctx, "outbox: postgres: notification listener recovered", slog.String("table", table))
			}
			backoff = listenMinBackoff
		})
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNotPgx) {
			log.WarnContext(ctx, "outbox: postgres: cannot listen for notifications; new events wait for the poller's interval",
				slog.String("table", table), slog.String("error", err.Error()))
			return
		}
		if !failing {
			failing = true
			log.WarnContext(ctx, "outbox: postgres: notification listener lost its connection; reconnecting with backoff, polling continues (logged once until it recovers)",
				slog.String("table", table), slog.String("error", err.Error()))
		} else {
			log.DebugContext(ctx, "outbox: postgres: notification listener still cannot connect", slog.String("error", err.Error()))
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listeners counts, per pool, the listeners holding one of its
// connections (the outboxes of several tables, or of several tenants,
// may share a pool).
var listeners = struct {
	sync.Mutex
	held map[*sql.DB]int
}{held: map[*sql.DB]int{}}

// holdListener counts one more listener on db unless, with the pool's
// MaxOpenConnections set, it would leave the pool no connection; it
// returns how many listeners held one before.
func holdListener(db *sql.DB) (held int, ok bool) {
	listeners.Lock()
	defer listeners.Unlock()
	held = listeners.held[db]
	if m := db.Stats().MaxOpenConnections; m > 0 && held+1 >= m {
		return held, false
	}
	listeners.held[db] = held + 1
	return held, true
}

// releaseListener counts one listener on db less.
func releaseListener(db *sql.DB) {
	listeners.Lock()
	defer listeners.Unlock()
	if listeners.held[db]--; listeners.held[db] <= 0 {
		delete(listeners.held, db)
	}
}

// listenOnce listens on one connection until it fails or ctx ends; it
// calls listening once the LISTEN succeeded, then wake (announcements
// made before were lost).
func listenOnce(ctx context.Context, db *sqlx.DB, table string, wake, listening func()) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		sc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{table}.Sanitize()); err != nil {
			return err
		}
		defer unlisten(pc)
		listening()
		wake()
		for {
			wctx, cancel := context.WithTimeout(ctx, listenHealthInterval)
			_, err := pc.WaitForNotification(wctx)
			cancel()
			switch {
			case err == nil:
				wake()
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, context.DeadlineExceeded) && !pc.IsClosed():
				pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
				err = pc.Ping(pctx)
				cancel()
				if err != nil {
					return err
				}
			default:
				return err
			}
		}
	})
}

// unlisten stops listening on a connection that goes back to the pool
// alive; a dead one is discarded by the pool.
func unlisten(pc *pgx.Conn) {
	if pc.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), listenPingTimeout)
	defer cancel()
	_, _ = pc.Exec(ctx, "UNLISTEN *")
}

var _ jdbcstore.Notifier = pgDialect{}
