package jdbcstore

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// StatsOptions tunes StatsWith.
type StatsOptions struct {
	// MaxDeadTypes, when positive, bounds Stats.DeadByType to the
	// MaxDeadTypes event types with the most DEAD events (ties broken by
	// type, in the database's collation): the database still counts every
	// type, but the store reads only those. 0 reads every type, however
	// many (20,000 types are 20,000 rows). At most MaxListLimit.
	MaxDeadTypes int
}

// Stats is StatsWith without options: Stats.DeadByType holds every event
// type with DEAD events.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	if ctx == nil {
		return Stats{}, core.ErrNilContext
	}
	return s.StatsWith(ctx, StatsOptions{})
}

// DeadTypeCount is the number of DEAD events of one event type.
type DeadTypeCount struct {
	Type  string // the event type
	Count int    // its DEAD events
}

// MaxDeadTypesOffset bounds the offset of DeadTypes.
const MaxDeadTypesOffset = 100_000_000

// DeadTypes returns the event types with DEAD events and their counts,
// most DEAD events first (ties broken by type, in the database's
// collation), skipping the first offset: a page of at most limit
// (1..MaxListLimit) types. offset is 0..MaxDeadTypesOffset. The database
// counts every type for each page.
func (s *Store) DeadTypes(ctx context.Context, offset, limit int) ([]DeadTypeCount, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d, got %d", MaxListLimit, limit)}
	}
	if offset < 0 || offset > MaxDeadTypesOffset {
		return nil, &core.ConfigError{Field: "offset", Msg: fmt.Sprintf("must be 0..%d, got %d", MaxDeadTypesOffset, offset)}
	}
	s.checkPins(ctx)
	q, args := s.deadTypesQuery(offset, limit)
	var out []DeadTypeCount
	err := s.eachRow(ctx, q, args, func(rows *sqlx.Rows) error {
		var tc DeadTypeCount
		if err := rows.Scan(&tc.Type, &tc.Count); err != nil {
			return err
		}
		out = append(out, tc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: dead types: %w", err)
	}
	return out, nil
}

// deadTypesQuery returns the statement counting DEAD rows per type and
// its arguments: every type when limit is 0, else limit of them, most
// first, after offset.
func (s *Store) deadTypesQuery(offset, limit int) (string, []any) {
	q := s.q.deadByType
	if s.pinDead.Load() {
		q = s.q.deadByTypePinned
	}
	if limit == 0 {
		return q, nil
	}
	q += " ORDER BY COUNT(*) DESC, " + typeKey(s.dialect) + " LIMIT ?"
	args := []any{limit}
	if offset > 0 {
		q += " OFFSET ?"
		args = append(args, offset)
	}
	return q, args
}

// typeKey is what groups and sorts DEAD rows by event type: event_type,
// and on a PAD SPACE database its byte length too, so that "Order" and
// "Order " are two types there as everywhere.
func typeKey(d Dialect) string {
	if d.Capabilities().PadSpace {
		return "event_type, LENGTH(event_type)"
	}
	return "event_type"
}
