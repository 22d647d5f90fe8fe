package jdbcstore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// Store is the SQL implementation of [core.Store]. It is safe for
// concurrent use. Create it with [New].
type Store struct {
	db      *sqlx.DB
	dialect Dialect
	table   string
	maxErr  int
	now     func() time.Time
	log     *slog.Logger
	schema  string
	q       statements

	// busyHook, when set (by tests), is called before each wait of the
	// busy retry loop.
	busyHook func(attempt int, err error)
}

var _ core.Store = (*Store)(nil)

// New returns a Store over db configured by cfg. It validates cfg and
// renders the SQL but does not touch the database: call
// [Store.ApplySchema] to create the table.
//
// Errors wrap [core.ErrInvalidConfig] (see [core.ConfigError]) or, for a
// bad table name, [core.ErrInvalidIdentifier].
func New(db *sqlx.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, &core.ConfigError{Field: "db", Msg: "must not be nil"}
	}
	cfg = cfg.withDefaults(db.DriverName())
	if err := cfg.validate(db.DriverName()); err != nil {
		return nil, err
	}
	schema, err := renderSchema(cfg.Dialect, cfg.Table)
	if err != nil {
		return nil, err
	}
	return &Store{
		db:      db,
		dialect: cfg.Dialect,
		table:   cfg.Table,
		maxErr:  cfg.MaxErrorLen,
		now:     cfg.Now,
		log:     cfg.Logger,
		schema:  schema,
		q:       buildStatements(cfg.Dialect, cfg.Table),
	}, nil
}

// Table returns the outbox table name.
func (s *Store) Table() string { return s.table }

// Dialect returns the store's dialect.
func (s *Store) Dialect() Dialect { return s.dialect }

// DB returns the database the store was created with.
func (s *Store) DB() *sqlx.DB { return s.db }

// Insert stores env with status NEW, attempts 0 and available_at =
// created_at = Config.Now() on ex, normally the caller's business
// transaction (*sql.Tx, *sqlx.Tx or a core.Tx). The row exists only if
// that transaction commits.
//
// env is validated first. A duplicate event id returns an error wrapping
// [core.ErrDuplicateEvent]. Lock contention is retried only when ex is the
// store's own database (an autocommit insert); inside a transaction the
// caller owns the retry.
func (s *Store) Insert(ctx context.Context, ex core.Execer, env core.Envelope) error {
	if ex == nil {
		return fmt.Errorf("outbox: jdbcstore: insert: %w", core.ErrNoTransaction)
	}
	if err := env.Validate(); err != nil {
		return fmt.Errorf("outbox: jdbcstore: insert: %w", err)
	}
	headers, err := core.EncodeHeaders(env.RawHeaders())
	if err != nil {
		return fmt.Errorf("outbox: jdbcstore: insert %q: %w", env.ID(), err)
	}
	payload, err := s.dialect.encodePayload(env.PayloadKind(), env.RawPayload())
	if err != nil {
		return fmt.Errorf("outbox: jdbcstore: insert %q: encode payload: %w", env.ID(), err)
	}
	now := s.dialect.encodeTime(s.now())
	args := []any{
		env.ID(), env.Type(),
		nullString(env.AggregateType()), nullString(env.AggregateID()), nullString(env.TenantID()),
		s.dialect.encodeTime(env.OccurredAt()),
		payload, int64(env.PayloadKind()), nullString(headers),
		now, now,
	}
	exec := func() (sql.Result, error) { return ex.ExecContext(ctx, s.q.insert, args...) }
	if s.ownsExecer(ex) {
		_, err = retryBusy(ctx, s, exec)
	} else {
		_, err = exec()
	}
	if err != nil {
		return s.mapError("insert", env.ID(), err)
	}
	return nil
}

// ownsExecer reports whether ex is the store's own pool, so a failed
// statement ran in autocommit mode and can be retried as a whole.
func (s *Store) ownsExecer(ex core.Execer) bool {
	switch ex := ex.(type) {
	case *sqlx.DB:
		return ex == s.db
	case *sql.DB:
		return ex == s.db.DB
	}
	return false
}

// MarkDone sets the event DONE with done_at = Config.Now() and releases
// its lease. It is idempotent: it returns false when the event is already
// DONE or does not exist.
func (s *Store) MarkDone(ctx context.Context, id string) (bool, error) {
	return s.update(ctx, "mark done", id, s.q.markDone, s.dialect.encodeTime(s.now()), id)
}

// MarkRetry sets the event RETRY, increments attempts, sets available_at
// to nextAt and last_error to errMsg truncated to Config.MaxErrorLen
// characters. It never changes a DONE event (returns false).
func (s *Store) MarkRetry(ctx context.Context, id string, nextAt time.Time, errMsg string) (bool, error) {
	return s.update(ctx, "mark retry", id, s.q.markRetry,
		s.dialect.encodeTime(nextAt), truncateError(errMsg, s.maxErr), id)
}

// MarkDead sets the event DEAD, increments attempts (so a DEAD row counts
// every failed delivery) and sets last_error to errMsg truncated to
// Config.MaxErrorLen characters. It never changes a DONE event (returns
// false).
func (s *Store) MarkDead(ctx context.Context, id string, errMsg string) (bool, error) {
	return s.update(ctx, "mark dead", id, s.q.markDead, truncateError(errMsg, s.maxErr), id)
}

// update runs a single-row status write on the store's pool, retrying lock
// contention until ctx ends, and reports whether a row changed.
func (s *Store) update(ctx context.Context, op, id, query string, args ...any) (bool, error) {
	res, err := retryBusy(ctx, s, func() (sql.Result, error) {
		return s.db.ExecContext(ctx, query, args...)
	})
	if err != nil {
		return false, s.mapError(op, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.mapError(op, id, err)
	}
	return n > 0, nil
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
