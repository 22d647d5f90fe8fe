package core

import (
	"context"
	"database/sql"
	"time"
)

// Execer runs a statement. *sql.DB, *sql.Tx, *sqlx.DB, *sqlx.Tx and [Tx]
// implementations satisfy it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Inserter writes a NEW event row on the caller's transaction.
type Inserter interface {
	// Insert stores env with status NEW on ex (the business transaction).
	// A duplicate id returns an error wrapping ErrDuplicateEvent.
	Insert(ctx context.Context, ex Execer, env Envelope) error
}

// StatusWriter records the outcome of a delivery. Each method returns
// whether a row changed; none of them touches a DONE row.
type StatusWriter interface {
	// MarkDone sets DONE and done_at. It is idempotent.
	MarkDone(ctx context.Context, eventID string) (bool, error)
	// MarkRetry sets RETRY, increments attempts, sets available_at to
	// nextAt and last_error to a truncated errMsg.
	MarkRetry(ctx context.Context, eventID string, nextAt time.Time, errMsg string) (bool, error)
	// MarkDead sets DEAD, increments attempts and records errMsg.
	MarkDead(ctx context.Context, eventID string, errMsg string) (bool, error)
}

// PendingSource finds events that still need delivery.
type PendingSource interface {
	// PollPending returns up to limit NEW or RETRY rows whose available_at
	// is at or before now and that were created at least skipRecent before
	// now, oldest available first.
	PollPending(ctx context.Context, now time.Time, skipRecent time.Duration, limit int) ([]Record, error)
}

// Store is the persistence seam of the framework. jdbcstore implements it
// for SQL databases; tests may use an in-memory implementation. All methods
// must be safe for concurrent use.
type Store interface {
	Inserter
	StatusWriter
	PendingSource
}
