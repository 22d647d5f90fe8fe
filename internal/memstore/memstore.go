// Package memstore is an in-memory core.Store for unit tests of the
// dispatcher and poller. It follows the SQL semantics of jdbcstore (DONE
// rows are never updated, MarkRetry/MarkDead increment attempts) but has no
// transactions: Insert writes at once whatever Execer it is given.
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
)

// Store is an in-memory core.Store. The zero value is not usable; call New.
type Store struct {
	mu   sync.Mutex
	now  func() time.Time
	rows map[string]*core.Record
	// Fail, when set, is consulted before every operation ("insert",
	// "done", "retry", "dead", "claim", "reap", "poll", "release"); a non-nil result
	// is returned as the operation's error and nothing changes. "claim"
	// and "reap" are consulted without the store's lock held, so a hook
	// may block them without blocking the other operations.
	Fail func(op, eventID string) error
	// Changed, when set, is signalled (non-blocking) after every status write.
	Changed chan struct{}

	doneCalls atomic.Int64
}

// DoneCalls returns how many MarkDone calls (statements) were made.
func (s *Store) DoneCalls() int64 { return s.doneCalls.Load() }

var _ core.Store = (*Store)(nil)

// New returns an empty store using now as its clock (time.Now if nil).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, rows: map[string]*core.Record{}}
}

func (s *Store) fail(op, id string) error {
	if s.Fail == nil {
		return nil
	}
	return s.Fail(op, id)
}

func (s *Store) signal() {
	if s.Changed != nil {
		select {
		case s.Changed <- struct{}{}:
		default:
		}
	}
}

// Insert implements core.Inserter.
func (s *Store) Insert(_ context.Context, _ core.Execer, env core.Envelope, lease core.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("insert", env.ID()); err != nil {
		return err
	}
	if _, dup := s.rows[env.ID()]; dup {
		return fmt.Errorf("%w: %s", core.ErrDuplicateEvent, env.ID())
	}
	r, err := s.record(env, lease)
	if err != nil {
		return err
	}
	s.rows[env.ID()] = r
	return nil
}

var _ core.BatchInserter = (*Store)(nil)

// InsertBatch implements core.BatchInserter, all or nothing: Fail is
// consulted with "insert" for every event first, and an error, a
// duplicate id (in the batch or the store) or an invalid envelope
// returns a *core.BatchError and stores none of envs. It keeps no order:
// an ordered envelope is stored like any other (the publishing client
// refuses ordered events for a store without core.OrderedInserter).
func (s *Store) InsertBatch(_ context.Context, _ core.Execer, envs []core.Envelope, leases []core.Lease) ([]bool, error) {
	if len(leases) != len(envs) {
		return nil, fmt.Errorf("memstore: %d leases for %d events", len(leases), len(envs))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := make([]*core.Record, len(envs))
	seen := make(map[string]bool, len(envs))
	for i, env := range envs {
		fail := func(err error) ([]bool, error) {
			return nil, &core.BatchError{Index: i, ID: env.ID(), Err: err}
		}
		if err := env.Validate(); err != nil {
			return fail(err)
		}
		if err := s.fail("insert", env.ID()); err != nil {
			return fail(err)
		}
		if _, dup := s.rows[env.ID()]; dup || seen[env.ID()] {
			return fail(fmt.Errorf("%w: %s", core.ErrDuplicateEvent, env.ID()))
		}
		seen[env.ID()] = true
		r, err := s.record(env, leases[i])
		if err != nil {
			return fail(err)
		}
		recs[i] = r
	}
	leased := make([]bool, len(envs))
	for i, r := range recs {
		s.rows[r.ID] = r
		leased[i] = !leases[i].IsZero()
	}
	return leased, nil
}

// record is the NEW row of env, owned by lease.
func (s *Store) record(env core.Envelope, lease core.Lease) (*core.Record, error) {
	h, err := core.EncodeHeaders(env.RawHeaders())
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	due := now
	if nb := env.NotBefore(); nb.After(due) {
		due = nb.UTC()
	}
	return &core.Record{
		LockedBy: lease.Owner, LockedUntil: lease.Until,
		ID: env.ID(), Type: env.Type(), OccurredAt: env.OccurredAt(),
		AggregateType: env.AggregateType(), AggregateID: env.AggregateID(), TenantID: env.TenantID(),
		HeadersJSON: h, Payload: env.Payload(), PayloadKind: env.PayloadKind(),
		Status: core.StatusNew, AvailableAt: due, CreatedAt: now,
	}, nil
}

// Put stores a raw record as is (for tests of undecodable rows).
func (s *Store) Put(r core.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[r.ID] = &r
}

// update applies fn to row id if it is not DONE and owner holds it. The
// empty owner holds nothing: an unowned row is not writable (as in SQL,
// where locked_by = ? never matches NULL).
func (s *Store) update(op, owner, id string, fn func(r *core.Record)) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(op, id); err != nil {
		return false, err
	}
	r, ok := s.rows[id]
	if !ok || r.Status == core.StatusDone || owner == "" || r.LockedBy != owner {
		return false, nil
	}
	fn(r)
	s.signal()
	return true, nil
}

// MarkDone implements core.StatusWriter.
func (s *Store) MarkDone(_ context.Context, owner string, ids []string) (int64, error) {
	s.doneCalls.Add(1)
	var n int64
	for _, id := range ids {
		ok, err := s.update("done", owner, id, func(r *core.Record) {
			r.Status, r.DoneAt = core.StatusDone, s.now().UTC()
			r.LockedBy, r.LockedUntil = "", time.Time{}
		})
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// MarkRetry implements core.StatusWriter.
func (s *Store) MarkRetry(_ context.Context, owner, id string, nextAt, leaseUntil time.Time, msg string) (bool, error) {
	return s.update("retry", owner, id, func(r *core.Record) {
		r.Status, r.AvailableAt, r.LastError = core.StatusRetry, nextAt.UTC(), msg
		r.LockedUntil = leaseUntil.UTC()
		r.Attempts++
	})
}

// MarkDead implements core.StatusWriter.
func (s *Store) MarkDead(_ context.Context, owner, id, msg string) (bool, error) {
	return s.update("dead", owner, id, func(r *core.Record) {
		r.Status, r.LastError, r.DoneAt = core.StatusDead, msg, s.now().UTC()
		r.LockedBy, r.LockedUntil = "", time.Time{}
		r.Attempts++
	})
}

// Postpone implements core.Postponer.
func (s *Store) Postpone(_ context.Context, owner, id string, nextAt time.Time, msg string) (bool, error) {
	return s.update("postpone", owner, id, func(r *core.Record) {
		r.AvailableAt, r.LastError = nextAt.UTC(), msg
		r.LockedBy, r.LockedUntil = "", time.Time{}
	})
}

// ClaimDue implements core.Claimer.
func (s *Store) ClaimDue(ctx context.Context, req core.ClaimRequest) ([]core.Record, error) {
	if err := s.fail("claim", ""); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []*core.Record
	for _, r := range s.rows {
		if (r.Status == core.StatusNew || r.Status == core.StatusRetry) &&
			!r.AvailableAt.After(req.Now) && !r.CreatedAt.After(req.Now.Add(-req.SkipRecent)) &&
			(r.LockedBy == "" || (r.LockedBy == req.Owner && !req.SkipOwn) || r.LockedUntil.Before(req.Now)) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *core.Record) int {
		return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	if len(due) > req.Limit {
		due = due[:req.Limit]
	}
	out := make([]core.Record, len(due))
	for i, r := range due {
		r.LockedBy, r.LockedUntil = req.Owner, req.LeaseUntil.UTC()
		out[i] = *r
	}
	return out, nil
}

// ReapExpired implements core.Claimer.
func (s *Store) ReapExpired(_ context.Context, now time.Time, limit int) (int64, error) {
	if err := s.fail("reap", ""); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.rows {
		if n >= int64(limit) {
			break
		}
		if (r.Status == core.StatusNew || r.Status == core.StatusRetry) && r.LockedBy != "" && r.LockedUntil.Before(now) {
			r.LockedBy, r.LockedUntil = "", time.Time{}
			n++
		}
	}
	return n, nil
}

// ReleaseLeases implements core.LeaseReleaser.
func (s *Store) ReleaseLeases(_ context.Context, owner string, exceptIDs []string) (int64, error) {
	if err := s.fail("release", ""); err != nil {
		return 0, err
	}
	keep := make(map[string]bool, len(exceptIDs))
	for _, id := range exceptIDs {
		keep[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.rows {
		if (r.Status == core.StatusNew || r.Status == core.StatusRetry) && owner != "" && r.LockedBy == owner && !keep[r.ID] {
			r.LockedBy, r.LockedUntil = "", time.Time{}
			n++
		}
	}
	return n, nil
}

var _ core.LeaseReleaser = (*Store)(nil)

// ExtendLeases implements core.LeaseExtender.
func (s *Store) ExtendLeases(_ context.Context, owner string, ids []string, until time.Time) (int64, error) {
	if err := s.fail("extend", ""); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range ids {
		r, ok := s.rows[id]
		if ok && (r.Status == core.StatusNew || r.Status == core.StatusRetry) && owner != "" && r.LockedBy == owner {
			r.LockedUntil = until.UTC()
			n++
		}
	}
	return n, nil
}

var _ core.LeaseExtender = (*Store)(nil)

// PollPending implements core.PendingSource.
func (s *Store) PollPending(_ context.Context, now time.Time, skipRecent time.Duration, limit int) ([]core.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("poll", ""); err != nil {
		return nil, err
	}
	var out []core.Record
	for _, r := range s.rows {
		if (r.Status == core.StatusNew || r.Status == core.StatusRetry) &&
			!r.AvailableAt.After(now) && !r.CreatedAt.After(now.Add(-skipRecent)) {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b core.Record) int {
		return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Get returns a copy of one row.
func (s *Store) Get(id string) (core.Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id]
	if !ok {
		return core.Record{}, false
	}
	return *r, true
}

// Count returns how many rows have status st.
func (s *Store) Count(st core.Status) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.rows {
		if r.Status == st {
			n++
		}
	}
	return n
}
