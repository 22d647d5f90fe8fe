package jdbcstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ctxerr"
)

var _ core.SuccessorClaimer = (*Store)(nil)

// nextChunk is the most positions one ClaimNext statement looks up (two
// placeholders each); longer lists take several statements.
const nextChunk = 200

// ClaimNext leases the event after each position of req.After, when it is
// claimable (see core.SuccessorClaimer), and returns the leased rows in
// claim order.
//
// One statement per 200 positions finds the rows on the order index (key
// and position) and leases them with the same condition as ClaimDue, so a
// predecessor still pending, or another node's claim in between, leaves a
// row alone: SQLite and PostgreSQL run one UPDATE … RETURNING
// (PostgreSQL's subquery locks FOR UPDATE SKIP LOCKED), MySQL/MariaDB
// select the rows FOR UPDATE SKIP LOCKED and lease them in a short
// transaction. There a row the claim skipped because another transaction
// held it (the transaction publishing the event after it, whose insert
// reads it under a shared lock) comes back in NextResult.Locked: a plain
// read in the same transaction finds it. A position whose next event is
// unowned but not due yet comes back in NextResult.Later, with the time
// it is due (NextDue: the earliest), read in one more statement only when
// some position got neither a row nor a lock.
//
// An invalid owner, a lease end not after req.Now, or a position with an
// empty or too long key, a key of invalid UTF-8 or holding NUL (also
// wrapping core.ErrInvalidText) or a position below 1 returns an error
// wrapping core.ErrInvalidConfig, before anything is read.
func (s *Store) ClaimNext(ctx context.Context, req core.NextRequest) (core.NextResult, error) {
	if ctx == nil {
		return core.NextResult{}, core.ErrNilContext
	}
	var res core.NextResult
	if err := validOwner(req.Owner); err != nil {
		return res, fmt.Errorf("outbox: jdbcstore: claim next: %w", err)
	}
	if !req.LeaseUntil.After(req.Now) {
		return res, &core.ConfigError{Field: "leaseUntil", Msg: "must be after now"}
	}
	for i, p := range req.After {
		switch {
		case p.Key == "" || utf8.RuneCountInString(p.Key) > core.MaxOrderKeyLen:
			return res, &core.ConfigError{Field: fmt.Sprintf("after[%d].key", i), Msg: fmt.Sprintf("must be 1 to %d characters", core.MaxOrderKeyLen)}
		case !storable(p.Key): // no event has it (and PostgreSQL refuses the text)
			return res, &core.ConfigError{Field: fmt.Sprintf("after[%d].key", i), Msg: "must be valid UTF-8 without NUL", Err: core.ErrInvalidText}
		case p.Seq < 1:
			return res, &core.ConfigError{Field: fmt.Sprintf("after[%d].seq", i), Msg: fmt.Sprintf("must be >= 1, got %d", p.Seq)}
		}
	}
	after := latestPerKey(req.After)
	for rest := after; len(rest) > 0; {
		chunk := rest[:min(len(rest), nextChunk)]
		rest = rest[len(chunk):]
		recs, locked, err := s.claimNext(ctx, req, chunk)
		res.Claimed = append(res.Claimed, recs...)
		res.Locked = append(res.Locked, locked...)
		if err == nil {
			err = s.laterAfter(ctx, req.Now, chunk, recs, locked, &res)
		}
		if err != nil {
			sortClaim(res.Claimed)
			return res, fmt.Errorf("outbox: jdbcstore: claim next: %w", err)
		}
	}
	sortClaim(res.Claimed)
	return res, nil
}

// WaitingAfter returns the positions of those of the finished ordered
// events ids behind which an event waits for a poller (see
// core.SuccessorClaimer): one read by primary key per 200 ids, each row's
// successor looked up on the order index. An empty ids returns nothing;
// an empty or too long id, or one of invalid UTF-8 or holding NUL,
// returns an error wrapping core.ErrInvalidConfig.
func (s *Store) WaitingAfter(ctx context.Context, now time.Time, ids []string) ([]core.OrderPos, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	for i, id := range ids {
		if id == "" || utf8.RuneCountInString(id) > core.MaxEventIDLen {
			return nil, &core.ConfigError{Field: fmt.Sprintf("ids[%d]", i), Msg: fmt.Sprintf("must be 1 to %d characters", core.MaxEventIDLen)}
		}
		if !storable(id) {
			return nil, &core.ConfigError{Field: fmt.Sprintf("ids[%d]", i), Msg: "must be valid UTF-8 without NUL", Err: core.ErrInvalidText}
		}
	}
	var all []core.OrderPos
	for rest := ids; len(rest) > 0; {
		chunk := rest[:min(len(rest), nextChunk)]
		rest = rest[len(chunk):]
		args := make([]any, len(chunk), len(chunk)+1)
		for i, id := range chunk {
			args[i] = id
		}
		args = append(args, s.dialect.EncodeTime(now))
		query := inList(s.dialect, s.q.positionsPrefix, len(chunk), s.q.positionsSuffix)
		found, err := retryBusy(ctx, s, func() ([]core.OrderPos, error) {
			return scanPositions(ctx, s.db, query, args...)
		})
		if err != nil {
			return nil, fmt.Errorf("outbox: jdbcstore: events waiting after %d events: %w", len(ids), err)
		}
		all = append(all, found...)
	}
	return latestPerKey(all), nil
}

// latestPerKey keeps the latest position of each key of after, in the
// order the keys first appear.
func latestPerKey(after []core.OrderPos) []core.OrderPos {
	index := make(map[string]int, len(after))
	out := after[:0:0]
	for _, p := range after {
		i, dup := index[p.Key]
		switch {
		case !dup:
			index[p.Key] = len(out)
			out = append(out, p)
		case p.Seq > out[i].Seq:
			out[i] = p
		}
	}
	return out
}

// scanPositions runs a query returning (order_key, order_seq) rows on q.
func scanPositions(ctx context.Context, q queryer, query string, args ...any) ([]core.OrderPos, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.OrderPos
	for rows.Next() {
		var p core.OrderPos
		if err := rows.Scan(&p.Key, &p.Seq); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// claimNext is ClaimNext for one chunk of positions. It also returns the
// positions whose next event a claim skipping locked rows left because
// another transaction held it (MySQL/MariaDB: see lockedAfter).
func (s *Store) claimNext(ctx context.Context, req core.NextRequest, after []core.OrderPos) (claimed []core.Record, locked []core.OrderPos, err error) {
	d := s.dialect
	now := d.EncodeTime(req.Now)
	// created_at <= now: no SkipRecent; the empty owner holds no lease, so
	// only unowned rows and expired leases qualify.
	claimable := []any{now, now, now, ""}
	positions := make([]any, 0, 2*len(after))
	for _, p := range after {
		positions = append(positions, p.Key, p.Seq+1)
	}
	switch caps := d.Capabilities(); {
	case caps.Returning:
		s.checkPins(ctx)
		prefix := s.q.claimNextPrefix
		if s.pinOrder.Load() {
			prefix = s.q.claimNextPinned
		}
		query := positionList(d, prefix, len(after), s.q.claimNextSuffix)
		args := make([]any, 0, 2+len(positions)+len(claimable))
		args = append(append(append(args, req.Owner, d.EncodeTime(req.LeaseUntil)), positions...), claimable...)
		gctx, release, err := s.gate.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer release()
		claimed, err = s.queryRecords(gctx, len(after), query, args...)
		return claimed, nil, err
	case caps.SkipLocked:
		query := positionList(d, s.q.selectNextPrefix, len(after), s.q.selectNextSuffix)
		args := append(positions, claimable...)
		claimed, err = retryBusy(ctx, s, func() ([]core.Record, error) {
			locked = nil
			return s.claimLocked(ctx, req.Owner, req.LeaseUntil, func(tx *sqlx.Tx) ([]core.Record, error) {
				recs, err := scanRecords(ctx, s, tx, len(after), query, args...)
				if err != nil || len(recs) == len(after) {
					return recs, err
				}
				locked, err = s.lockedAfter(ctx, tx, after, recs, claimable)
				return recs, err
			})
		})
		return claimed, locked, err
	default:
		return nil, nil, fmt.Errorf("dialect %s supports neither RETURNING nor SKIP LOCKED", d.Name())
	}
}

// lockedAfter returns the positions of after whose next event is
// claimable but was not among claimed, the rows a claim skipping locked
// rows read: another transaction held it. On MySQL/MariaDB the
// transaction that publishes the event after it does, until it ends (its
// insert reads the row under a shared lock to learn whether the key is
// free), and nothing would claim the event once that transaction
// committed. A plain read in tx (no lock, the latest committed rows)
// finds them.
func (s *Store) lockedAfter(ctx context.Context, tx *sqlx.Tx, after []core.OrderPos, claimed []core.Record, claimable []any) ([]core.OrderPos, error) {
	args, n := untakenNext(after, claimed, nil, len(claimable))
	if n == 0 {
		return nil, nil
	}
	args = append(args, claimable...)
	locked, err := scanPositions(ctx, tx, positionList(s.dialect, s.q.lockedNextPrefix, n, s.q.lockedNextSuffix), args...)
	for i := range locked {
		locked[i].Seq-- // the position after which the locked event comes
	}
	return locked, err
}

// untakenNext returns the arguments of positionList for the next event of
// each position of after that neither a row of claimed follows nor locked
// holds (key and seq + 1 each, with room for extra more arguments), and
// their number.
func untakenNext(after []core.OrderPos, claimed []core.Record, locked []core.OrderPos, extra int) (args []any, n int) {
	taken := make(map[core.OrderPos]bool, len(claimed)+len(locked))
	for _, r := range claimed {
		taken[core.OrderPos{Key: r.OrderKey, Seq: r.OrderSeq - 1}] = true
	}
	for _, p := range locked {
		taken[p] = true
	}
	args = make([]any, 0, 2*len(after)+extra)
	for _, p := range after {
		if !taken[p] {
			args = append(args, p.Key, p.Seq+1)
			n++
		}
	}
	return args, n
}

// laterAfter adds to res the positions of after whose next event is
// neither among claimed nor locked but waits, unowned, until a time after
// now (see core.NextResult.Later), and the earliest such time.
func (s *Store) laterAfter(ctx context.Context, now time.Time, after []core.OrderPos, claimed []core.Record, locked []core.OrderPos, res *core.NextResult) error {
	args, n := untakenNext(after, claimed, locked, 2)
	if n == 0 {
		return nil
	}
	at := s.dialect.EncodeTime(now)
	args = append(args, at, at)
	query := positionList(s.dialect, s.q.laterNextPrefix, n, s.q.laterNextSuffix)
	type due struct {
		pos core.OrderPos
		at  time.Time
	}
	found, err := retryBusy(ctx, s, func() ([]due, error) {
		rows, err := s.db.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []due
		for rows.Next() {
			var d due
			var raw any
			if err := rows.Scan(&d.pos.Key, &d.pos.Seq, &raw); err != nil {
				return nil, err
			}
			if d.at, err = s.dialect.DecodeTime(raw); err != nil {
				return nil, fmt.Errorf("available_at of the event at %q/%d: %w", d.pos.Key, d.pos.Seq, err)
			}
			d.pos.Seq-- // the position after which it waits
			out = append(out, d)
		}
		return out, rows.Err()
	})
	for _, d := range found {
		res.Later = append(res.Later, d.pos)
		if res.NextDue.IsZero() || d.at.Before(res.NextDue) {
			res.NextDue = d.at
		}
	}
	return err
}

// withoutHeldBack returns recs without the ordered events whose event
// before still holds their key, read again in a statement of its own. The
// claim's SELECT … FOR UPDATE SKIP LOCKED reads each row as last
// committed (InnoDB's locking read) but its check of the event before, a
// plain subquery, in the snapshot the statement began with: an event
// committed while the statement ran (under load, a claim of a long
// backlog) was taken although the event before it, committed just before
// it, was pending, and two events of a key were delivered out of order.
// The next statement's snapshot (READ COMMITTED) holds every event the
// claim read and the ones before them.
func (s *Store) withoutHeldBack(ctx context.Context, tx *sqlx.Tx, recs []core.Record) ([]core.Record, error) {
	var args []any
	for _, r := range recs {
		if r.OrderKey != "" && r.OrderSeq > 1 {
			args = append(args, r.OrderKey, r.OrderSeq-1)
		}
	}
	if len(args) == 0 {
		return recs, nil
	}
	held := map[core.OrderPos]bool{}
	for page := range slices.Chunk(args, max(2, s.bindLimit()/2*2)) {
		found, err := scanPositions(ctx, tx, positionList(s.dialect, s.q.heldPrefix, len(page)/2, s.q.heldSuffix), page...)
		if err != nil {
			return nil, err
		}
		for _, p := range found {
			held[p] = true
		}
	}
	if len(held) == 0 {
		return recs, nil
	}
	kept := recs[:0]
	for _, r := range recs {
		if r.OrderKey == "" || !held[core.OrderPos{Key: r.OrderKey, Seq: r.OrderSeq - 1}] {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// positionList returns prefix, n position terms joined by OR, and suffix,
// rebound for the dialect.
func positionList(d Dialect, prefix string, n int, suffix string) string {
	const term = "(order_key = ? AND order_seq = ?)"
	var b strings.Builder
	b.Grow(len(prefix) + (len(term)+4)*n + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString(term)
	}
	b.WriteString(suffix)
	return sqlx.Rebind(d.BindType(), b.String())
}

// nextStatements sets the fragments of ClaimNext's statements, with '?'
// placeholders (positionList completes and rebinds them).
func (q *statements) nextStatements(d Dialect, table string) {
	t := d.QuoteIdent(table)
	st := func(s core.Status) string { return strconv.Itoa(int(s)) }
	update := "UPDATE " + t + " SET locked_by = ?, locked_until = ? WHERE event_id IN (SELECT event_id FROM "
	q.claimNextPrefix = update + t + " WHERE ("
	if pinsPending(d) {
		// Without statistics SQLite reads "status IN (0, 2)" from the
		// status index rather than look up more than a few positions.
		q.claimNextPinned = update + t + " INDEXED BY " + d.QuoteIdent(orderIndex(table)) + " WHERE ("
	}
	q.claimNextSuffix = ") AND " + q.claimable + skipLocked(d) + ") RETURNING " + selectList(d)
	q.selectNextPrefix = "SELECT " + selectList(d) + " FROM " + t + " WHERE ("
	q.selectNextSuffix = ") AND " + q.claimable + " FOR UPDATE SKIP LOCKED"
	q.lockedNextPrefix = "SELECT order_key, order_seq FROM " + t + " WHERE ("
	q.positionsPrefix = "SELECT order_key, order_seq FROM " + t + " WHERE event_id IN ("
	q.positionsSuffix = ") AND order_key IS NOT NULL AND EXISTS (SELECT 1 FROM " + t + " n WHERE n.order_key = " + t + ".order_key" +
		" AND n.order_seq = " + t + ".order_seq + 1 AND n.status IN (" + st(core.StatusNew) + ", " + st(core.StatusRetry) + ")" +
		" AND (n.locked_by IS NULL OR n.locked_until < ?))"
	q.lockedNextSuffix = ") AND " + q.claimable
	q.laterNextPrefix = "SELECT order_key, order_seq, " + timeExpr(d, "available_at") + " FROM " + t + " WHERE ("
	q.laterNextSuffix = ") AND status IN (" + st(core.StatusNew) + ", " + st(core.StatusRetry) + ")" +
		" AND available_at > ? AND (locked_by IS NULL OR locked_until < ?)"
	q.heldPrefix = "SELECT order_key, order_seq FROM " + t + " WHERE ("
	q.heldSuffix = ") AND " + holdsKey("")
}

// claimLocked runs pick in a short READ COMMITTED transaction (a SELECT
// ... FOR UPDATE SKIP LOCKED of the rows to claim), leases the rows it
// returns to owner until until, and commits.
func (s *Store) claimLocked(ctx context.Context, owner string, until time.Time, pick func(tx *sqlx.Tx) ([]core.Record, error)) ([]core.Record, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	recs, err := pick(tx)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	if recs, err = s.withoutHeldBack(ctx, tx, recs); err != nil || len(recs) == 0 {
		return nil, err
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if _, err := s.execByIDs(ids, []any{owner, s.dialect.EncodeTime(until)}, nil, func(page []string, args []any) (int64, error) {
		_, err := tx.ExecContext(ctx, inList(s.dialect, s.q.claimUpdatePrefix, len(page), ")"), args...)
		return 0, err
	}); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, ctxerr.OfCommit(ctx, err)
	}
	until = until.UTC().Truncate(time.Microsecond)
	for i := range recs {
		recs[i].LockedBy, recs[i].LockedUntil = owner, until
	}
	return recs, nil
}
