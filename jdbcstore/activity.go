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
// read-only statement over the rows finished since the first interval
// started. buckets must be 1..MaxActivityBuckets and width positive.
//
// Rows purged by a retention cleanup are no longer counted, and DEAD rows
// written before done_at was set on DEAD are not counted at all.
func (s *Store) Activity(ctx context.Context, buckets int, width time.Duration) ([]ActivityBucket, error) {
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
	// One SUM(CASE ...) per bucket boundary after the first: the count
	// of rows at or after that boundary; differences give the buckets.
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString("SELECT status, COUNT(*)")
	for i := 1; i < buckets; i++ {
		b.WriteString(", SUM(CASE WHEN done_at >= ? THEN 1 ELSE 0 END)")
		args = append(args, s.dialect.EncodeTime(out[i].Start))
	}
	b.WriteString(" FROM " + s.dialect.QuoteIdent(s.table) + " WHERE status IN (" +
		strconv.Itoa(int(core.StatusDone)) + ", " + strconv.Itoa(int(core.StatusDead)) + ") AND done_at >= ? AND done_at < ? GROUP BY status")
	args = append(args, s.dialect.EncodeTime(start), s.dialect.EncodeTime(end))
	err := s.eachRow(ctx, b.String(), args, func(rows *sqlx.Rows) error {
		var status int
		atLeast := make([]int64, buckets) // atLeast[i]: rows with done_at >= out[i].Start
		dst := make([]any, buckets+1)
		dst[0] = &status
		for i := range atLeast {
			dst[i+1] = &atLeast[i]
		}
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		for i := range out {
			n := atLeast[i]
			if i+1 < buckets {
				n -= atLeast[i+1]
			}
			switch core.Status(status) {
			case core.StatusDone:
				out[i].Done = int(n)
			case core.StatusDead:
				out[i].Dead = int(n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: activity: %w", err)
	}
	return out, nil
}
