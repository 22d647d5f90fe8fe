package jdbcstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// Defaults of the operations.
const (
	// DefaultOpsBatch is the batch size of ReplayDead, DiscardDead and Purge.
	DefaultOpsBatch = 500
	// MaxListLimit bounds one page of ListDead.
	MaxListLimit = 1000
)

// Stats is a snapshot of the table for operators.
type Stats struct {
	// Counts per status; the four statuses are always present.
	Counts map[core.Status]int
	// OldestPending is the created_at of the oldest NEW/RETRY row (zero
	// when none): the outbox lag is Now - OldestPending.
	OldestPending time.Time
	// Lag is Now - OldestPending, or 0.
	Lag time.Duration
	// DeadByType counts DEAD rows per event type.
	DeadByType map[string]int
	// BlockedKeys counts the ordering keys held by a DEAD event under the
	// block policy: their later events wait until it is replayed or
	// discarded.
	BlockedKeys int
}

// Stats counts rows per status, finds the oldest pending event, counts
// DEAD rows per event type and the blocked ordering keys, in four short
// read-only statements.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	counts, err := s.CountByStatus(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Counts: counts, DeadByType: map[string]int{}}
	oldest, err := retryBusy(ctx, s, func() ([]any, error) {
		var v any
		err := s.db.QueryRowContext(ctx, s.q.oldestPending).Scan(&v)
		return []any{v}, err
	})
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: jdbcstore: stats: %w", err)
	}
	if st.OldestPending, err = s.dialect.DecodeTime(oldest[0]); err != nil {
		return Stats{}, fmt.Errorf("outbox: jdbcstore: stats: oldest pending: %w", err)
	}
	if !st.OldestPending.IsZero() {
		st.Lag = max(0, s.now().Sub(st.OldestPending))
	}
	s.checkPins(ctx)
	byType := s.q.deadByType
	if s.pinDead.Load() {
		byType = s.q.deadByTypePinned
	}
	err = s.eachRow(ctx, byType, nil, func(rows *sqlx.Rows) error {
		var typ string
		var n int
		if err := rows.Scan(&typ, &n); err != nil {
			return err
		}
		st.DeadByType[typ] = n
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: jdbcstore: stats: dead by type: %w", err)
	}
	blocked, err := s.countBlockedKeys(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: jdbcstore: stats: blocked keys: %w", err)
	}
	st.BlockedKeys = blocked
	return st, nil
}

// DeadFilter selects DEAD events. Empty fields do not filter; IDs, when
// set, restrict to those ids. Any number of ids works: more than one
// statement takes (1,000, fewer where the dialect's
// Capabilities.MaxBindParams says so) are sorted and read a statement's
// worth at a time in that order, which is the event id order of every
// supported schema (ids compare byte for byte), so results and pages are
// the same as with one statement.
type DeadFilter struct {
	IDs       []string
	EventType string
	TenantID  string
	From, To  time.Time // created_at in [From, To); zero means unbounded
}

// maxDeadIDsPerStatement bounds the ids of a DeadFilter in one statement:
// far below every database's placeholder limit, and short to parse.
const maxDeadIDsPerStatement = 1000

// deadFilterArgs is the most arguments of a dead-letter query besides its
// ids: event type, tenant, From, To, after and limit.
const deadFilterArgs = 6

// deadIDsPerStatement is how many ids of a DeadFilter one statement takes.
func (s *Store) deadIDsPerStatement() int {
	limit := s.dialect.Capabilities().MaxBindParams
	if limit <= 0 {
		limit = defaultMaxBindParams
	}
	return max(1, min(maxDeadIDsPerStatement, limit-deadFilterArgs))
}

// splitIDs returns f with its ids sorted and without duplicates (a copy)
// when they are more than one statement takes, f itself otherwise; the
// result is what listDead takes.
func (s *Store) splitIDs(f DeadFilter) DeadFilter {
	if len(f.IDs) > s.deadIDsPerStatement() {
		f.IDs = slices.Compact(slices.Sorted(slices.Values(f.IDs)))
	}
	return f
}

func (f DeadFilter) empty() bool {
	return len(f.IDs) == 0 && f.EventType == "" && f.TenantID == "" && f.From.IsZero() && f.To.IsZero()
}

// where renders the filter as SQL conditions (AND-joined, after the
// status condition) with their arguments.
func (s *Store) deadWhere(f DeadFilter) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString("status = " + strconv.Itoa(int(core.StatusDead)))
	if len(f.IDs) > 0 {
		b.WriteString(" AND event_id IN (")
		for i, id := range f.IDs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			args = append(args, id)
		}
		b.WriteByte(')')
	}
	if f.EventType != "" {
		b.WriteString(" AND event_type = ?")
		args = append(args, f.EventType)
	}
	if f.TenantID != "" {
		b.WriteString(" AND tenant_id = ?")
		args = append(args, f.TenantID)
	}
	if !f.From.IsZero() {
		b.WriteString(" AND created_at >= ?")
		args = append(args, s.dialect.EncodeTime(f.From))
	}
	if !f.To.IsZero() {
		b.WriteString(" AND created_at < ?")
		args = append(args, s.dialect.EncodeTime(f.To))
	}
	return b.String(), args
}

// ListDead returns up to limit DEAD events matching f whose id sorts after
// after ("" for the first page), ordered by event id: pass the last id of a
// page as after to get the next. limit must be 1..MaxListLimit.
func (s *Store) ListDead(ctx context.Context, f DeadFilter, after string, limit int) ([]core.Record, error) {
	if limit < 1 || limit > MaxListLimit {
		return nil, &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d, got %d", MaxListLimit, limit)}
	}
	return s.listDead(ctx, s.splitIDs(f), after, limit)
}

// listDead is ListDead for a filter from splitIDs: ids more than one
// statement takes are sorted, and read in statements of
// deadIDsPerStatement from the first after after, until limit rows came.
func (s *Store) listDead(ctx context.Context, f DeadFilter, after string, limit int) ([]core.Record, error) {
	s.checkPins(ctx)
	per := s.deadIDsPerStatement()
	if len(f.IDs) <= per {
		q, args := s.listDeadQuery(f, after, limit)
		recs, err := s.queryRecords(ctx, limit, q, args...)
		if err != nil {
			return nil, fmt.Errorf("outbox: jdbcstore: list dead: %w", err)
		}
		return recs, nil
	}
	ids := f.IDs
	if i, found := slices.BinarySearch(ids, after); found {
		ids = ids[i+1:]
	} else {
		ids = ids[i:]
	}
	var out []core.Record
	for len(ids) > 0 && len(out) < limit {
		part := f
		part.IDs = ids[:min(len(ids), per)]
		ids = ids[len(part.IDs):]
		q, args := s.listDeadQuery(part, after, limit-len(out))
		recs, err := s.queryRecords(ctx, limit-len(out), q, args...)
		if err != nil {
			return nil, fmt.Errorf("outbox: jdbcstore: list dead: %w", err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// listDeadQuery returns the query of a ListDead page and its arguments.
func (s *Store) listDeadQuery(f DeadFilter, after string, limit int) (string, []any) {
	where, args := s.deadWhere(f)
	if after != "" {
		where += " AND event_id > ?"
		args = append(args, after)
	}
	from := s.dialect.QuoteIdent(s.table)
	if s.pinDead.Load() {
		// SQLite without statistics reads status = 3 from the (status,
		// done_at) index and sorts every DEAD row; the partial dead index
		// is in id order.
		from += " INDEXED BY " + s.dialect.QuoteIdent(deadIndex(s.table))
	}
	if hint := s.deadTypeHint.Load(); hint != nil && f.EventType != "" {
		from += " " + *hint
	}
	q := sqlx.Rebind(s.dialect.BindType(), "SELECT "+selectList(s.dialect)+" FROM "+from+
		" WHERE "+where+" ORDER BY event_id LIMIT ?")
	return q, append(args, limit)
}

// ReplayOptions tunes ReplayDead.
type ReplayOptions struct {
	// All must be set to replay every DEAD event when the filter is empty,
	// so an empty filter never replays everything by accident.
	All bool
	// DryRun counts (and returns the ids of) what would be replayed,
	// changing nothing.
	DryRun bool
	// BatchSize is the most rows changed per statement. Defaults to DefaultOpsBatch.
	BatchSize int
}

// ReplayResult tells what ReplayDead did (or would do).
type ReplayResult struct {
	Matched  int      // DEAD rows matching the filter
	Replayed int      // rows moved back to NEW (0 in a dry run)
	IDs      []string // ids matched, in id order
}

// ReplayDead moves matching DEAD events back to NEW with attempts 0, no
// error, no lease and due now, in batches of BatchSize (each its own short
// statement). The poller then delivers them through the normal path.
func (s *Store) ReplayDead(ctx context.Context, f DeadFilter, o ReplayOptions) (ReplayResult, error) {
	if f.empty() && !o.All {
		return ReplayResult{}, &core.ConfigError{Field: "filter", Msg: "is empty: give ids, a type, a tenant or a time range, or set All"}
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultOpsBatch
	}
	if o.BatchSize < 1 || o.BatchSize > MaxListLimit {
		return ReplayResult{}, &core.ConfigError{Field: "BatchSize", Msg: fmt.Sprintf("must be 1..%d", MaxListLimit)}
	}
	f = s.splitIDs(f)
	var res ReplayResult
	after := ""
	for {
		page, err := s.listDead(ctx, f, after, o.BatchSize)
		if err != nil {
			return res, err
		}
		if len(page) == 0 {
			return res, nil
		}
		ids := make([]any, 0, len(page)+1)
		ids = append(ids, s.dialect.EncodeTime(s.now()))
		for _, r := range page {
			res.IDs = append(res.IDs, r.ID)
			ids = append(ids, r.ID)
		}
		res.Matched += len(page)
		after = page[len(page)-1].ID
		if o.DryRun {
			continue
		}
		q := inList(s.dialect, "UPDATE "+s.dialect.QuoteIdent(s.table)+" SET status = "+strconv.Itoa(int(core.StatusNew))+
			", attempts = 0, available_at = ?, done_at = NULL, last_error = NULL, locked_by = NULL, locked_until = NULL"+
			" WHERE event_id IN (", len(page), ") AND status = "+strconv.Itoa(int(core.StatusDead)))
		n, err := s.exec(ctx, "replay dead", page[0].ID, q, ids...)
		res.Replayed += int(n)
		if err != nil {
			return res, err
		}
	}
}

// eachRow runs a query on the pool (retrying lock contention) and calls fn
// for every row.
func (s *Store) eachRow(ctx context.Context, query string, args []any, fn func(*sqlx.Rows) error) error {
	_, err := retryBusy(ctx, s, func() (struct{}, error) {
		rows, err := s.db.QueryxContext(ctx, sqlx.Rebind(s.dialect.BindType(), query), args...)
		if err != nil {
			return struct{}{}, err
		}
		defer rows.Close()
		for rows.Next() {
			if err := fn(rows); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, rows.Err()
	})
	return err
}
