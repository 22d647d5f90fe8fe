package postgres

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	// listenPingTimeout bounds that check, and reading the settings of the
	// pool's connections: a network fault that left the pool's idle
	// connections dead hangs the reset ping of the one lent, as long.
	listenPingTimeout = 5 * time.Second
	// listenConnectTimeout bounds connecting and the LISTEN: a dial to a
	// blackholed server hangs until the kernel gives up on it, minutes
	// later.
	listenConnectTimeout = 10 * time.Second
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

// Listen LISTENs on the channel of table on a connection of its own,
// opened with the settings of db's connections (read from one of them:
// host, credentials, TLS, fallbacks), so it takes none of the pool's
// connections: a pool that is itself a pgxpool.Pool
// (stdlib.OpenDBFromPool), whose limit database/sql cannot see, keeps
// every connection. It calls wake for every notification. Pinging after
// listenHealthInterval of silence detects a dead connection; a lost one
// is replaced with backoff (100 ms doubling to 5 s). It logs a lost
// connection once per incident (Warn) and the recovery (Info). On a pool
// limited to one connection (SetMaxOpenConns(1)) it does not listen: that
// is the way to run without the extra connection.
func (pgDialect) Listen(ctx context.Context, db *sqlx.DB, table string, log *slog.Logger, wake func()) {
	if db.Stats().MaxOpenConnections == 1 {
		log.InfoContext(ctx, "outbox: postgres: not listening for notifications on a pool limited to one connection (SetMaxOpenConns(1)); new events wait for the poller's interval",
			slog.String("table", table))
		return
	}
	listen(ctx, &listenSettings{read: func(ctx context.Context) (*pgx.ConnConfig, error) { return connConfig(ctx, db) }}, table, log, wake)
}

// listen is Listen's loop, its connections made with settings.
func listen(ctx context.Context, settings *listenSettings, table string, log *slog.Logger, wake func()) {
	backoff := listenMinBackoff
	failing := false
	for ctx.Err() == nil {
		err := listenOnce(ctx, settings, table, wake, func() {
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

// connConfig returns the settings of db's connections, read from one it
// lends for the moment (anew at each reconnect: a pool whose hook
// rotates the password has the current one).
func connConfig(ctx context.Context, db *sqlx.DB) (*pgx.ConnConfig, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var cfg *pgx.ConnConfig
	err = conn.Raw(func(driverConn any) error {
		sc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		cfg = sc.Conn().Config()
		return nil
	})
	return cfg, err
}

// listenSettings gives the settings of each new listening connection.
type listenSettings struct {
	read func(ctx context.Context) (*pgx.ConnConfig, error) // connConfig
	last *pgx.ConnConfig                                    // the last read, nil before
}

// get reads the settings afresh (a rotated password), or returns the last
// ones read when that fails for another reason than a driver that cannot
// listen: after a network fault the pool may lend a dead connection
// first, whose reset ping hangs: the read takes at most
// listenPingTimeout.
func (s *listenSettings) get(ctx context.Context) (*pgx.ConnConfig, error) {
	rctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
	defer cancel()
	cfg, err := s.read(rctx)
	switch {
	case err == nil:
		s.last = cfg
		return cfg, nil
	case errors.Is(err, errNotPgx) || s.last == nil:
		return nil, err
	}
	return s.last, nil
}

// listenOnce listens on a connection of its own until it fails or ctx
// ends; it calls listening once the LISTEN succeeded, then wake
// (announcements made before were lost). The connect and the LISTEN take
// at most listenConnectTimeout.
func listenOnce(ctx context.Context, settings *listenSettings, table string, wake, listening func()) error {
	cfg, err := settings.get(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, listenConnectTimeout)
	defer cancel()
	pc, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), listenPingTimeout)
		defer cancel()
		_ = pc.Close(cctx)
	}()
	// The session waits for notifications, idle from the server's point
	// of view: an idle_session_timeout (a role's or database's setting)
	// shorter than the health ping would end it again and again.
	// PostgreSQL before 14 has no such setting (42704): nothing to undo.
	if _, err := pc.Exec(cctx, "SET idle_session_timeout = 0"); err != nil && !isUndefinedObject(err) {
		return err
	}
	if _, err := pc.Exec(cctx, "LISTEN "+pgx.Identifier{table}.Sanitize()); err != nil {
		return err
	}
	cancel()
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
}

var _ jdbcstore.Notifier = pgDialect{}

// isUndefinedObject reports whether err is PostgreSQL's 42704
// (undefined_object), such as an unknown configuration parameter.
func isUndefinedObject(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeUndefinedObject
}
