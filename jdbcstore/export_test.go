package jdbcstore

import (
	"cmp"
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// DecodeRecord decodes a scanned row of recordColumns with d.
func DecodeRecord(d Dialect, v []any) core.Record { return (&Store{dialect: d}).decodeRecord(v) }

// SplitStatements exposes splitStatements.
func SplitStatements(script string) []string { return splitStatements(script) }

// ReapArgs returns the arguments of the reap statement for d: now (once
// or twice, as the statement states its condition) and limit.
func ReapArgs(d Dialect, now any, limit int) []any {
	if buildStatements(d, "t").reapNowTwice {
		return []any{now, now, limit}
	}
	return []any{now, limit}
}

// StatementText returns the SQL text of the store's statements for d and
// table, by field name.
func StatementText(d Dialect, table string) map[string]string {
	q := buildStatements(d, table)
	m := map[string]string{
		"insert": q.insert, "markDone1": q.markDone1, "markRetry": q.markRetry, "markDead": q.markDead,
		"postpone": q.postpone, "poll": q.poll, "claimReturning": q.claimReturning, "claimPinned": q.claimPinned, "pollPinned": q.pollPinned, "claimSelect": q.claimSelect, "claimSelectRetry": q.claimSelectRetry,
		"reap": cmp.Or(q.reapPick, q.reap), "release": q.release, "get": q.get, "exists": q.exists, "countByStatus": q.countByStatus,
		"markDone3":     inList(d, q.markDonePrefix, 3, q.markDoneSuffix),
		"oldestPending": q.oldestPending, "firstDue": q.firstDue, "deadByType": q.deadByType, "deadByTypePinned": q.deadByTypePinned, "countBlocked": q.countBlocked,
		"purgePage": q.purgePage, "purgeCount": q.purgeCount, "purgeBatch": q.purgeBatch, "purgeLegacyPage": q.purgeLegacyPage,
		"purgeDelete3":       inList(d, q.purgeDeletePrefix, 3, q.purgeDeleteSuffix),
		"purgeDeleteLegacy3": inList(d, q.purgeDeletePrefix, 3, q.purgeDeleteLegacySuffix),
		"waiting1":           inList(d, q.waitingPrefix, 1, q.waitingSuffix),
		"claimNext3":         positionList(d, q.claimNextPrefix, 3, q.claimNextSuffix),
		"selectNext3":        positionList(d, q.selectNextPrefix, 3, q.selectNextSuffix),
		"positions3":         inList(d, q.positionsPrefix, 3, q.positionsSuffix),
	}
	if q.claimNextPinned != "" {
		m["claimNextPinned60"] = positionList(d, q.claimNextPinned, 60, q.claimNextSuffix)
	}
	return m
}

// SetBusyHook sets the hook called before each wait of the busy retry
// loop.
func SetBusyHook(s *Store, f func(attempt int, err error)) { s.busyHook = f }

// SetDeadPageHook sets the hook ReplayDead and DiscardDead call between
// the read of a batch and its write.
func SetDeadPageHook(s *Store, f func(page []DeadSummary)) { s.deadPageHook = f }

// SetPurgeHooks sets the hooks that observe Purge: page receives the ids
// of each page read, before its DELETE (not on SQLite, which deletes a
// batch in one statement); pause the wait after each batch that handled
// rows.
func SetPurgeHooks(s *Store, page func(ids []any), pause func(wait time.Duration)) {
	s.purgeHooks = &purgeHooks{page: page, pause: pause}
}

// ListDeadQuery returns the query and arguments of a ListDead page.
func ListDeadQuery(s *Store, f DeadFilter, after string, limit int) (string, []any) {
	return s.listDeadQuery(f, after, limit)
}

// ActivityQuery exposes the statement of Store.Activity over buckets of
// width ending at end.
func ActivityQuery(s *Store, buckets int, width time.Duration, end time.Time) (string, []any) {
	out := make([]ActivityBucket, buckets)
	for i := range out {
		out[i].Start = end.Add(-time.Duration(buckets-i) * width)
	}
	q, args := s.activityQuery(out, end)
	return sqlx.Rebind(s.dialect.BindType(), q), args
}

// ByID reports whether ordered inserts read the event before by the id
// the keys table records.
func (s *Store) ByID() bool { return s.byID() }

// WithoutHeldBack runs withoutHeldBack on recs in a READ COMMITTED
// transaction of its own, as a claim does.
func (s *Store) WithoutHeldBack(ctx context.Context, recs []core.Record) ([]core.Record, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a read only
	return s.withoutHeldBack(ctx, tx, recs)
}
