package jdbcstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// PollPending returns up to limit NEW or RETRY events whose available_at is
// at or before now and whose created_at is at or before now-skipRecent,
// ordered by available_at, then created_at, then event_id.
//
// Records carry every column. A row whose stored columns cannot be decoded
// (for example a corrupt payload) is still returned, with
// [core.Record.DecodeErr] set, so the caller can mark it DEAD; it never
// fails the poll. limit must be positive and skipRecent not negative,
// otherwise the error wraps [core.ErrInvalidConfig].
func (s *Store) PollPending(ctx context.Context, now time.Time, skipRecent time.Duration, limit int) ([]core.Record, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if limit <= 0 {
		return nil, &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be > 0, got %d", limit)}
	}
	if skipRecent < 0 {
		return nil, &core.ConfigError{Field: "skipRecent", Msg: fmt.Sprintf("must not be negative, got %s", skipRecent)}
	}
	s.checkPins(ctx)
	stmt := s.q.poll
	if s.pinPending.Load() {
		stmt = s.q.pollPinned
	}
	recs, err := s.queryRecords(ctx, limit, stmt,
		s.dialect.EncodeTime(now), s.dialect.EncodeTime(now.Add(-skipRecent)), limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: poll pending: %w", err)
	}
	return recs, nil
}

// Get returns the stored event with the given id. A missing event returns an error
// wrapping [core.ErrNotFound]. Undecodable columns are reported in
// [core.Record.DecodeErr], as by PollPending.
func (s *Store) Get(ctx context.Context, id string) (core.Record, error) {
	if ctx == nil {
		return core.Record{}, core.ErrNilContext
	}
	if !storable(id) { // no row has it, and PostgreSQL refuses the text itself
		return core.Record{}, fmt.Errorf("outbox: jdbcstore: get %q: %w", id, core.ErrNotFound)
	}
	recs, err := s.queryRecords(ctx, 1, s.q.get, id)
	if err != nil {
		return core.Record{}, fmt.Errorf("outbox: jdbcstore: get %q: %w", id, err)
	}
	if len(recs) == 0 {
		return core.Record{}, fmt.Errorf("outbox: jdbcstore: get %q: %w", id, core.ErrNotFound)
	}
	return recs[0], nil
}

// Statuses returns the status of each of the events ids that exists (a
// missing one has no entry), reading the ids and statuses only, never the
// payloads: what an operator asks of the events a replay or a discard did
// not take. It takes any number of ids, read in statements of at most
// 1000.
func (s *Store) Statuses(ctx context.Context, ids []string) (map[string]core.Status, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	out := make(map[string]core.Status, len(ids))
	per := s.deadIDsPerStatement()
	for len(ids) > 0 {
		part := ids[:min(len(ids), per)]
		ids = ids[len(part):]
		args := make([]any, len(part))
		for i, id := range part {
			if !storable(id) {
				id = "" // no row has it (PostgreSQL refuses the text itself)
			}
			args[i] = id
		}
		q := "SELECT event_id, status FROM " + s.dialect.QuoteIdent(s.table) + " WHERE event_id IN (?" +
			strings.Repeat(", ?", len(part)-1) + ")"
		err := s.eachRow(ctx, q, args, func(rows *sqlx.Rows) error {
			var (
				id     string
				status int64
			)
			if err := rows.Scan(&id, &status); err != nil {
				return err
			}
			out[id] = core.Status(status)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("outbox: jdbcstore: statuses: %w", err)
		}
	}
	return out, nil
}

// CountByStatus returns how many events have each status. The four
// defined statuses are always present, with 0 when no row has them.
func (s *Store) CountByStatus(ctx context.Context) (map[core.Status]int, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	counts, err := retryBusy(ctx, s, func() (map[core.Status]int, error) {
		var c [4]int
		if err := s.db.QueryRowContext(ctx, s.q.countByStatus).Scan(&c[0], &c[1], &c[2], &c[3]); err != nil {
			return nil, err
		}
		if s.q.countFromTotal {
			// Every row, NEW, RETRY, DEAD: the rest are DONE, the only
			// other status the store writes.
			return map[core.Status]int{
				core.StatusNew: c[1], core.StatusRetry: c[2], core.StatusDead: c[3],
				core.StatusDone: max(0, c[0]-c[1]-c[2]-c[3]),
			}, nil
		}
		return map[core.Status]int{core.StatusNew: c[0], core.StatusDone: c[1], core.StatusRetry: c[2], core.StatusDead: c[3]}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: count by status: %w", err)
	}
	return counts, nil
}

// queryRecords runs a query returning recordColumns on the store's pool,
// retrying lock contention.
func (s *Store) queryRecords(ctx context.Context, sizeHint int, query string, args ...any) ([]core.Record, error) {
	return retryBusy(ctx, s, func() ([]core.Record, error) {
		return scanRecords(ctx, s, s.db, sizeHint, query, args...)
	})
}

// queryer is *sqlx.DB or *sqlx.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scanRecords runs a query returning recordColumns on q once.
func scanRecords(ctx context.Context, s *Store, q queryer, sizeHint int, query string, args ...any) ([]core.Record, error) {
	return scanRows(ctx, q, len(recordColumns), sizeHint, s.decodeRecord, query, args...)
}

// scanRows runs a query returning ncols columns on q once and turns each
// row into a T with decode. Scanning into *any cannot fail on content;
// decode reports what it cannot decode in the value it returns and never
// fails the query.
func scanRows[T any](ctx context.Context, q queryer, ncols, sizeHint int, decode func([]any) T, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]T, 0, min(sizeHint, 256))
	vals := make([]any, ncols)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		clear(vals)
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, decode(vals))
	}
	return out, rows.Err()
}

// decodeRecord turns the raw column values of one row (in recordColumns
// order) into a Record. Column problems are collected in DecodeErr.
func (s *Store) decodeRecord(v []any) core.Record {
	var r core.Record
	if len(v) != len(recordColumns) {
		r.DecodeErr = fmt.Errorf("row has %d columns, want %d", len(v), len(recordColumns))
		return r
	}
	c := &columns{d: s.dialect, names: recordColumns, v: v}
	c.str(0, &r.ID)
	c.str(1, &r.Type)
	c.str(2, &r.AggregateType)
	c.str(3, &r.AggregateID)
	c.str(4, &r.TenantID)
	c.time(5, &r.OccurredAt, true)
	c.str(8, &r.HeadersJSON)
	r.Status = core.Status(c.int(9))
	r.Attempts = int(c.int(10))
	c.time(11, &r.AvailableAt, true)
	c.time(12, &r.CreatedAt, true)
	c.time(13, &r.DoneAt, false)
	c.str(14, &r.LastError)
	c.str(15, &r.LockedBy)
	c.time(16, &r.LockedUntil, false)
	c.str(17, &r.OrderKey)
	if r.OrderKey != "" {
		r.OrderSeq = c.int(18)
		if c.int(19) != 0 {
			r.OnDead = core.SkipOnDead
		}
	}

	kind, err := asInt(v[7])
	if err == nil && (kind < 0 || kind > 255) {
		err = fmt.Errorf("payload kind %d out of range", kind)
	}
	c.fail(7, err)
	if err == nil {
		r.PayloadKind = core.PayloadKind(kind)
		r.Payload, err = s.dialect.DecodePayload(r.PayloadKind, v[6])
		c.fail(6, err)
	}
	r.DecodeErr = c.err()
	return r
}

// asString reads a text column: NULL is "".
func asString(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	}
	return "", fmt.Errorf("stored value is %T, want text", v)
}

// asInt reads an integer column. Some drivers return integers as text.
func asInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("value %d out of range", v)
		}
		return int64(v), nil
	case []byte:
		return strconv.ParseInt(string(v), 10, 64)
	case string:
		return strconv.ParseInt(v, 10, 64)
	case nil:
		return 0, errors.New("is NULL")
	}
	return 0, fmt.Errorf("stored value is %T, want integer", v)
}
