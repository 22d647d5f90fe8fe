package jdbcstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// MaxActivityBuckets bounds the buckets of one Activity call.
const MaxActivityBuckets = 120

// ActivityBucket counts the events that finished in one interval of
// time: delivered (DONE) or given up (DEAD).
type ActivityBucket struct {
	Start time.Time // the interval is [Start, Start+width)
	Done  int       // rows DONE whose done_at falls in the interval
	Dead  int       // rows DEAD whose done_at falls in the interval
}

// Activity counts the events that finished (DONE or DEAD, by done_at) in
// each of buckets consecutive intervals of width ending at the store's
// now, oldest first: the recent throughput and failures. It runs one
// read-only statement counting index ranges (status, done_at). buckets must be 1..MaxActivityBuckets and width positive.
//
// Rows purged by a retention cleanup are no longer counted, and DEAD rows
// written before done_at was set on DEAD are not counted at all.
func (s *Store) Activity(ctx context.Context, buckets int, width time.Duration) ([]ActivityBucket, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if buckets < 1 || buckets > MaxActivityBuckets {
		return nil, &core.ConfigError{Field: "buckets", Msg: fmt.Sprintf("must be 1..%d, got %d", MaxActivityBuckets, buckets)}
	}
	if width <= 0 {
		return nil, &core.ConfigError{Field: "width", Msg: fmt.Sprintf("must be positive, got %s", width)}
	}
	end := s.now()
	start := end.Add(-time.Duration(buckets) * width)
	out := make([]ActivityBucket, buckets)
	for i := range out {
		out[i].Start = start.Add(time.Duration(i) * width)
	}
	q, args := s.activityQuery(out, end)
	counts := make([]int64, 2*buckets)
	err := s.eachRow(ctx, q, args, func(rows *sqlx.Rows) error {
		dst := make([]any, len(counts))
		for i := range counts {
			dst[i] = &counts[i]
		}
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		for i := range out {
			out[i].Done = int(counts[i])
			out[i].Dead = int(counts[buckets+i])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: activity: %w", err)
	}
	return out, nil
}

// activityQuery returns the statement counting the DONE and DEAD rows of
// each bucket of out (the last one ending at end) and its arguments: the
// DONE counts of every bucket, then the DEAD counts.
func (s *Store) activityQuery(out []ActivityBucket, end time.Time) (string, []any) {
	// One count per status and bucket, each a range of the (status,
	// done_at) index counted without reading the rows: a single pass
	// testing every row against each boundary costs a CASE per boundary
	// per row (1,000,000 rows finished within the hour: ~600 ms on SQLite
	// against ~30 ms).
	statuses := []core.Status{core.StatusDone, core.StatusDead}
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString("SELECT ")
	for k, st := range statuses {
		for i := range out {
			if k > 0 || i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(SELECT COUNT(*) FROM " + s.dialect.QuoteIdent(s.table) + " WHERE " + finishedTerm(s.dialect) + "status = " + strconv.Itoa(int(st)) +
				" AND done_at >= ? AND done_at < ?)")
			to := end
			if i+1 < len(out) {
				to = out[i+1].Start
			}
			args = append(args, s.dialect.EncodeTime(out[i].Start), s.dialect.EncodeTime(to))
		}
	}
	return b.String(), args
}
