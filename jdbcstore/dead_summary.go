package jdbcstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
)

// DeadSummary is a DEAD event without its payload and headers: what a
// list of dead letters shows, read without the up to
// core.MaxPayloadBytes of payload and core.MaxHeadersBytes of headers of
// each event. Its fields are those of core.Record of the same names.
type DeadSummary struct {
	ID            string
	Type          string
	AggregateType string
	AggregateID   string
	TenantID      string
	Attempts      int
	CreatedAt     time.Time
	// DiedAt is when the event went DEAD (the done_at column); zero for a
	// row written before DEAD rows carried it.
	DiedAt    time.Time
	LastError string
	// OrderKey is the event's ordering key, "" for none.
	OrderKey string
	// OrderSeq and OnDead are the event's position in its key and its
	// dead policy; zero unless OrderKey is set.
	OrderSeq int64
	OnDead   core.DeadPolicy
	// OccurredAt, AvailableAt, LockedBy and LockedUntil are the columns
	// of the same names.
	OccurredAt  time.Time
	AvailableAt time.Time
	LockedBy    string
	LockedUntil time.Time
	// PayloadKind is the kind of the payload left unread.
	PayloadKind core.PayloadKind
	// DecodeErr reports the columns that could not be decoded, as
	// core.Record.DecodeErr does; the other fields are set.
	DecodeErr error
}

// summaryColumns are the columns of a DeadSummary, in the order
// decodeSummary expects them.
var summaryColumns = []string{
	"event_id", "event_type", "aggregate_type", "aggregate_id", "tenant_id",
	"attempts", "created_at", "done_at", "last_error", "order_key",
	"order_seq", "order_skip", "occurred_at", "available_at", "locked_by",
	"locked_until", "payload_kind",
}

// ListDeadSummaries is ListDead without the payloads and headers: the
// same events, filter, order and paging (pass the ID of a page's last
// summary as after), read as DeadSummary. limit must be 1..MaxListLimit;
// an after no event id can be is refused, as by ListDead.
func (s *Store) ListDeadSummaries(ctx context.Context, f DeadFilter, after string, limit int) ([]DeadSummary, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := checkPage(after, limit); err != nil {
		return nil, err
	}
	return s.listSummaries(ctx, s.splitIDs(f), after, limit)
}

// listSummaries is ListDeadSummaries for a filter from splitIDs, as
// listDead is ListDead's. ReplayDead and DiscardDead select their pages
// with it: they need the ids and ordering columns, never the payloads.
func (s *Store) listSummaries(ctx context.Context, f DeadFilter, after string, limit int) ([]DeadSummary, error) {
	s.checkPins(ctx)
	cols := selectColumns(s.dialect, summaryColumns)
	read := func(part DeadFilter, limit int) ([]DeadSummary, error) {
		q, args := s.deadPageQuery(cols, part, after, limit)
		sums, err := retryBusy(ctx, s, func() ([]DeadSummary, error) {
			return scanRows(ctx, s.db, len(summaryColumns), limit, s.decodeSummary, q, args...)
		})
		if err != nil {
			return nil, fmt.Errorf("outbox: jdbcstore: list dead summaries: %w", err)
		}
		return sums, nil
	}
	// Ids more than one statement takes: read in statements of
	// deadIDsPerStatement from the first after after, as listDead does.
	per := s.deadIDsPerStatement()
	if len(f.IDs) <= per {
		return read(f, limit)
	}
	ids := f.IDs
	if i, found := slices.BinarySearch(ids, after); found {
		ids = ids[i+1:]
	} else {
		ids = ids[i:]
	}
	var out []DeadSummary
	for len(ids) > 0 && len(out) < limit {
		part := f
		part.IDs = ids[:min(len(ids), per)]
		ids = ids[len(part.IDs):]
		sums, err := read(part, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, sums...)
	}
	return out, nil
}

// selectColumns is the SELECT list of cols for d, as selectList's.
func selectColumns(d Dialect, cols []string) string {
	ts, ok := d.(TimeSelector)
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = c
		if ok && timeColumns[c] {
			exprs[i] = ts.SelectTime(c)
		}
	}
	return strings.Join(exprs, ", ")
}

// decodeSummary turns the raw column values of one row (in
// summaryColumns order) into a DeadSummary.
func (s *Store) decodeSummary(v []any) DeadSummary {
	var r DeadSummary
	c := &columns{d: s.dialect, names: summaryColumns, v: v}
	c.str(0, &r.ID)
	c.str(1, &r.Type)
	c.str(2, &r.AggregateType)
	c.str(3, &r.AggregateID)
	c.str(4, &r.TenantID)
	r.Attempts = int(c.int(5))
	c.time(6, &r.CreatedAt, true)
	c.time(7, &r.DiedAt, false)
	c.str(8, &r.LastError)
	c.str(9, &r.OrderKey)
	if r.OrderKey != "" {
		r.OrderSeq = c.int(10)
		if c.int(11) != 0 {
			r.OnDead = core.SkipOnDead
		}
	}
	c.time(12, &r.OccurredAt, true)
	c.time(13, &r.AvailableAt, true)
	c.str(14, &r.LockedBy)
	c.time(15, &r.LockedUntil, false)
	kind := c.int(16)
	if kind < 0 || kind > 255 {
		c.fail(16, fmt.Errorf("payload kind %d out of range", kind))
	} else {
		r.PayloadKind = core.PayloadKind(kind)
	}
	r.DecodeErr = c.err()
	return r
}
