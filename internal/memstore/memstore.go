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
	"time"

	"github.com/outbox-go/outbox/core"
)

// Store is an in-memory core.Store. The zero value is not usable; call New.
type Store struct {
	mu   sync.Mutex
	now  func() time.Time
	rows map[string]*core.Record
	// Fail, when set, is consulted before every operation ("insert",
	// "done", "retry", "dead", "poll"); a non-nil result is returned as the
	// operation's error and nothing changes.
	Fail func(op, eventID string) error
	// Changed, when set, is signalled (non-blocking) after every status write.
	Changed chan struct{}
}

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
func (s *Store) Insert(_ context.Context, _ core.Execer, env core.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("insert", env.ID()); err != nil {
		return err
	}
	if _, dup := s.rows[env.ID()]; dup {
		return fmt.Errorf("%w: %s", core.ErrDuplicateEvent, env.ID())
	}
	h, err := core.EncodeHeaders(env.RawHeaders())
	if err != nil {
		return err
	}
	now := s.now().UTC()
	s.rows[env.ID()] = &core.Record{
		ID: env.ID(), Type: env.Type(), OccurredAt: env.OccurredAt(),
		AggregateType: env.AggregateType(), AggregateID: env.AggregateID(), TenantID: env.TenantID(),
		HeadersJSON: h, Payload: env.Payload(), PayloadKind: env.PayloadKind(),
		Status: core.StatusNew, AvailableAt: now, CreatedAt: now,
	}
	return nil
}

// Put stores a raw record as is (for tests of undecodable rows).
func (s *Store) Put(r core.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[r.ID] = &r
}

func (s *Store) update(op, id string, fn func(r *core.Record)) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(op, id); err != nil {
		return false, err
	}
	r, ok := s.rows[id]
	if !ok || r.Status == core.StatusDone {
		return false, nil
	}
	fn(r)
	s.signal()
	return true, nil
}

// MarkDone implements core.StatusWriter.
func (s *Store) MarkDone(_ context.Context, id string) (bool, error) {
	return s.update("done", id, func(r *core.Record) {
		r.Status, r.DoneAt = core.StatusDone, s.now().UTC()
	})
}

// MarkRetry implements core.StatusWriter.
func (s *Store) MarkRetry(_ context.Context, id string, nextAt time.Time, msg string) (bool, error) {
	return s.update("retry", id, func(r *core.Record) {
		r.Status, r.AvailableAt, r.LastError = core.StatusRetry, nextAt.UTC(), msg
		r.Attempts++
	})
}

// MarkDead implements core.StatusWriter.
func (s *Store) MarkDead(_ context.Context, id string, msg string) (bool, error) {
	return s.update("dead", id, func(r *core.Record) {
		r.Status, r.LastError = core.StatusDead, msg
		r.Attempts++
	})
}

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
