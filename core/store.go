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

// Lease is the claim of one node on an event row: only Owner may write its
// outcome, until Until. The zero Lease means unowned.
type Lease struct {
	Owner string
	Until time.Time
}

// IsZero reports whether l is unowned: it has no Owner (whatever its
// Until, which says nothing without an owner).
func (l Lease) IsZero() bool { return l.Owner == "" }

// Inserter writes a NEW event row on the caller's transaction.
type Inserter interface {
	// Insert stores env with status NEW on ex (the business transaction),
	// owned by lease (unowned when zero), due at env.NotBefore() or now.
	// A duplicate id returns an error wrapping ErrDuplicateEvent.
	Insert(ctx context.Context, ex Execer, env Envelope, lease Lease) error
}

// StatusWriter records the outcome of deliveries. Every write is fenced on
// the owner: it changes only rows that are not DONE and whose lease is held
// by owner, so a node that lost its lease never overwrites another node's
// result. The returned count tells how many rows changed; fewer than asked
// means the rest are DONE already or owned by someone else.
type StatusWriter interface {
	// MarkDone sets DONE and done_at and releases the lease. Idempotent.
	MarkDone(ctx context.Context, owner string, eventIDs []string) (int64, error)
	// MarkRetry sets RETRY, increments attempts, sets available_at to
	// nextAt, keeps the lease until leaseUntil, and records a truncated errMsg.
	MarkRetry(ctx context.Context, owner, eventID string, nextAt, leaseUntil time.Time, errMsg string) (bool, error)
	// MarkDead sets DEAD, increments attempts, records errMsg and releases the lease.
	MarkDead(ctx context.Context, owner, eventID, errMsg string) (bool, error)
}

// Postponer is implemented by a [StatusWriter] that can put an event off
// without counting a failed attempt. The dispatcher uses it for an event
// no listener is registered for when dispatcher.Config.Unhandled is
// UnhandledLeave; with a store that does not implement it, such an event
// is only released and the poller claims it again at its next poll.
type Postponer interface {
	// Postpone sets available_at to nextAt and last_error to errMsg and
	// releases the lease, keeping status and attempts. Like every status
	// write it is fenced on owner: it changes nothing (returns false) when
	// the event is DONE or owner does not hold it.
	Postpone(ctx context.Context, owner, eventID string, nextAt time.Time, errMsg string) (bool, error)
}

// ClaimRequest asks for due rows to be leased to Owner.
type ClaimRequest struct {
	Owner      string        // the claiming node's owner token
	Now        time.Time     // rows due at or before Now
	LeaseUntil time.Time     // end of the new lease
	SkipRecent time.Duration // leave rows created within this of Now to the hot path
	Limit      int           // most rows to claim
	// SkipOwn leaves the rows whose live lease Owner holds already: a
	// poll woken for rows published unowned (or freed by their key's
	// predecessor) need not take this node's hot-path rows, which the
	// dispatcher holds in memory anyway.
	SkipOwn bool
}

// KeyWaiters is implemented by a store that keeps events in order
// ([OrderedInserter]) and can tell whether ordered events wait for a
// poller: the dispatcher asks after it finished events of keys, and wakes
// the poller for a full claim only when one of those keys has an event
// waiting. A store that is also a [SuccessorClaimer] is asked through
// that instead.
type KeyWaiters interface {
	// Waiting reports whether a NEW or RETRY event of one of keys is
	// unowned (it was inserted behind a pending event of its key) or
	// leased by a node whose lease ended (a node that is gone): only a
	// poller delivers it.
	Waiting(ctx context.Context, keys []string) (bool, error)
}

// Claimer leases due rows and recovers expired leases.
type Claimer interface {
	// ClaimDue atomically leases up to Limit NEW or RETRY rows that are due,
	// older than SkipRecent, and unowned, owned by someone whose lease
	// expired, or owned by Owner itself (unless SkipOwn); it returns them
	// oldest due first.
	ClaimDue(ctx context.Context, req ClaimRequest) ([]Record, error)
	// ReapExpired releases up to limit expired leases of NEW/RETRY rows and
	// returns how many.
	ReapExpired(ctx context.Context, now time.Time, limit int) (int64, error)
}

// PendingSource finds events that still need delivery, without claiming them.
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
	Claimer
	PendingSource
}

// LeaseReleaser is implemented by a [StatusWriter] that can hand back the
// leases a node holds on events it will not deliver, so that another node
// (or the same process restarted with a new owner token) delivers them at
// once instead of after the lease expires. It is optional: the dispatcher
// looks for it with a type assertion when it closes, and a StatusWriter
// without it leaves those leases to expire. jdbcstore.Store implements it.
type LeaseReleaser interface {
	// ReleaseLeases clears the lease (locked_by, locked_until) of every
	// NEW or RETRY row held by owner, except the rows whose ids are in
	// exceptIDs (events still being delivered), and returns how many it
	// released. DONE and DEAD rows and rows held by other owners are never
	// changed; status, attempts and available_at are kept, so a released
	// RETRY row is still not delivered before its retry time.
	ReleaseLeases(ctx context.Context, owner string, exceptIDs []string) (int64, error)
}

// LeaseExtender is implemented by a [StatusWriter] that can push back the
// end of leases a node holds. The dispatcher uses it for an event whose
// listener hung past its timeout and grace, ignoring its context: the
// failure is written (RETRY) but the event stays held until the call
// returns, and while it runs the dispatcher keeps the row's lease alive,
// so another node does not deliver the event (or, for an ordered event,
// the events after it) alongside. It also renews the lease of an event
// that waited for a worker until its lease no longer covers a listener
// call and its status write. It is optional: without it a hung
// listener's lease expires Lease after the retry's due time, and an event
// whose lease is too short to run on is left for a new claim.
// jdbcstore.Store implements it.
type LeaseExtender interface {
	// ExtendLeases sets the lease end (locked_until) of the NEW or RETRY
	// rows of ids that owner holds to until, and returns how many rows
	// changed. Rows of other owners, and DONE or DEAD rows, are never
	// changed.
	ExtendLeases(ctx context.Context, owner string, ids []string, until time.Time) (int64, error)
}

// BatchInserter is implemented by an [Inserter] that writes several NEW
// event rows in few statements (jdbcstore.Store: one multi-row INSERT per
// few hundred events). It is optional: the publishing client looks for it
// with a type assertion and, without it, inserts the events one by one
// on the same transaction.
type BatchInserter interface {
	// InsertBatch stores every envs[i] on ex as Insert would, owned by
	// leases[i] (unowned when zero); envs and leases have the same length.
	// An event with an OrderKey is inserted as
	// OrderedInserter.InsertOrdered inserts it (the events of one key
	// take their positions in slice order), and leased[i] reports whether
	// envs[i]'s row took its lease: false for an unowned row and for an
	// ordered event behind a pending event of its key.
	//
	// The batch is all or nothing as far as the store can make it: an
	// invalid envelope or a duplicate id, in the batch or in the table,
	// returns an error wrapping ErrDuplicateEvent for a duplicate (a
	// *BatchError naming the event, whenever the store can tell which)
	// and leaves none of envs on ex. Any other error may leave some of
	// them: roll ex back.
	InsertBatch(ctx context.Context, ex Execer, envs []Envelope, leases []Lease) (leased []bool, err error)
}
