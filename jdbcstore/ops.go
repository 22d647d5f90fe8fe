package jdbcstore

import (
	"context"
	"database/sql"
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
	// MaxListLimit bounds one page of ListDead and the BatchSize of
	// ReplayDead and DiscardDead.
	MaxListLimit = 1000
)

// Stats is a snapshot of the table for operators.
type Stats struct {
	// Counts per status; the four statuses are always present.
	Counts map[core.Status]int
	// OldestPending is the created_at of the oldest NEW/RETRY row (zero
	// when none), due or not.
	OldestPending time.Time
	// Lag is how long the pending event due first has been due: Now -
	// the earliest available_at of the NEW/RETRY rows (see
	// [Store.FirstDue]), or 0 when none is due yet. An event waiting for
	// its NotBefore, for its next retry or for an earlier event of its
	// ordering key to finish (BlockedKeys counts the keys a DEAD event
	// holds) is no lag (OldestPending counts it); this is what the
	// poller reports as the oldest pending age (core.Metrics.OldestLag).
	Lag time.Duration
	// DeadByType counts DEAD rows per event type: every type, or the
	// StatsOptions.MaxDeadTypes types with the most.
	DeadByType map[string]int
	// BlockedKeys counts the ordering keys held by a DEAD event under the
	// block policy: their later events wait until it is replayed or
	// discarded.
	BlockedKeys int
}

// FirstDue returns when the pending (NEW or RETRY) event due first became
// due, or will, of those a claim could take once due: the earliest
// available_at of the pending rows that wait for no earlier event of their
// ordering key, read from the pending index; the zero time when there is
// none. The events behind a key's DEAD event (a blocked key, see
// [Store.CountBlockedKeys]) or behind one waiting for its retry are no lag
// until that event finished; each is read past, one probe of the order
// index, as claims read them. Now minus it, when positive, is
// [Stats.Lag]. The poller reads it, at most every 10 Poller.Intervals (10
// s at most), while it holds events its claims leave out, so that
// core.Metrics.OldestLag sees a backlog held in its own queues.
func (s *Store) FirstDue(ctx context.Context) (time.Time, error) {
	if ctx == nil {
		return time.Time{}, core.ErrNilContext
	}
	v, err := retryBusy(ctx, s, func() (v any, err error) {
		err = s.db.QueryRowContext(ctx, s.q.firstDue).Scan(&v)
		return v, err
	})
	if err != nil {
		return time.Time{}, s.mapError("first due", "", err)
	}
	due, err := s.dialect.DecodeTime(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("outbox: jdbcstore: first due: %w", err)
	}
	return due, nil
}

// StatsWith counts rows per status, finds the oldest pending event,
// counts DEAD rows per event type (all types, or those o.MaxDeadTypes
// says) and the blocked ordering keys, in five short read-only
// statements.
func (s *Store) StatsWith(ctx context.Context, o StatsOptions) (Stats, error) {
	if ctx == nil {
		return Stats{}, core.ErrNilContext
	}
	if o.MaxDeadTypes < 0 || o.MaxDeadTypes > MaxListLimit {
		return Stats{}, &core.ConfigError{Field: "MaxDeadTypes", Msg: fmt.Sprintf("must be 0..%d, got %d", MaxListLimit, o.MaxDeadTypes)}
	}
	counts, err := s.CountByStatus(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Counts: counts, DeadByType: map[string]int{}}
	oldest, err := retryBusy(ctx, s, func() (v any, err error) {
		err = s.db.QueryRowContext(ctx, s.q.oldestPending).Scan(&v)
		return v, err
	})
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: jdbcstore: stats: %w", err)
	}
	if st.OldestPending, err = s.dialect.DecodeTime(oldest); err != nil {
		return Stats{}, fmt.Errorf("outbox: jdbcstore: stats: oldest pending: %w", err)
	}
	firstDue, err := s.FirstDue(ctx)
	if err != nil {
		return Stats{}, err // "outbox: jdbcstore: first due: …"
	}
	if !firstDue.IsZero() {
		st.Lag = max(0, s.now().Sub(firstDue))
	}
	s.checkPins(ctx)
	byType, args := s.deadTypesQuery(0, o.MaxDeadTypes)
	err = s.eachRow(ctx, byType, args, func(rows *sqlx.Rows) error {
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
	From, To  time.Time // created_at in [From, To), compared in whole microseconds as times are stored (digits below are dropped); zero means unbounded
}

// maxDeadIDsPerStatement bounds the ids of a DeadFilter in one statement:
// far below every database's placeholder limit, and short to parse.
const maxDeadIDsPerStatement = 1000

// deadFilterArgs is the most arguments of a dead-letter query besides its
// ids: event type, tenant, From, To, after and limit.
const deadFilterArgs = 6

// deadIDsPerStatement is how many ids of a DeadFilter one statement takes.
func (s *Store) deadIDsPerStatement() int {
	return max(1, min(maxDeadIDsPerStatement, s.bindLimit()-deadFilterArgs))
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

// exactText appends " AND column = ?" for value to b and its arguments to
// args. On a PAD SPACE database it also compares the byte lengths:
// 'Order ' = 'Order' there, and a filter naming one must not match (nor
// discard) the other.
func (s *Store) exactText(b *strings.Builder, column, value string, args []any) []any {
	b.WriteString(" AND " + column + " = ?")
	args = append(args, value)
	if s.dialect.Capabilities().PadSpace {
		b.WriteString(" AND LENGTH(" + column + ") = ?")
		args = append(args, len(value))
	}
	return args
}

// deadWhere renders the filter as SQL conditions (AND-joined, after the
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
			if !storable(id) {
				id = "" // no row has it (PostgreSQL refuses the text itself)
			}
			args = append(args, id)
		}
		b.WriteByte(')')
	}
	if !storable(f.EventType) || !storable(f.TenantID) {
		b.WriteString(" AND 1 = 0") // no row has it
		return b.String(), args
	}
	if f.EventType != "" {
		args = s.exactText(&b, "event_type", f.EventType, args)
	}
	if f.TenantID != "" {
		args = s.exactText(&b, "tenant_id", f.TenantID, args)
	}
	// Bounds outside the years a row's times can have are not encoded
	// (MySQL compares a year past 9999 as text, before every date): a
	// From past the last storable time, or a To before the first, matches
	// nothing; the others bound nothing.
	switch {
	case !f.From.IsZero() && f.From.After(lastStorableTime), !f.To.IsZero() && !f.To.After(firstStorableTime):
		b.WriteString(" AND 1 = 0")
		return b.String(), args
	}
	if !f.From.IsZero() && f.From.After(firstStorableTime) {
		b.WriteString(" AND created_at >= ?")
		args = append(args, s.dialect.EncodeTime(f.From))
	}
	if !f.To.IsZero() && !f.To.After(lastStorableTime) {
		b.WriteString(" AND created_at < ?")
		args = append(args, s.dialect.EncodeTime(f.To))
	}
	return b.String(), args
}

// ListDead returns up to limit DEAD events matching f whose id sorts after
// after ("" for the first page), ordered by event id: pass the last id of a
// page as after to get the next. limit must be 1..MaxListLimit. An after
// no event id can be (not valid UTF-8, or holding NUL) returns a
// *core.ConfigError of field after, on every database.
func (s *Store) ListDead(ctx context.Context, f DeadFilter, after string, limit int) ([]core.Record, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := checkPage(after, limit); err != nil {
		return nil, err
	}
	return s.listDead(ctx, s.splitIDs(f), after, limit)
}

// checkPage checks the cursor and the limit of a page of DEAD events.
// PostgreSQL refuses text that is not UTF-8 or holds NUL as a parameter;
// no id is such text, so no database gets it.
func checkPage(after string, limit int) error {
	if limit < 1 || limit > MaxListLimit {
		return &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d, got %d", MaxListLimit, limit)}
	}
	return CheckCursor(after)
}

// CheckCursor reports whether after can be the cursor of a page of DEAD
// events ([Store.ListDead], [Store.ListDeadSummaries]): "" or text an
// event id can be, valid UTF-8 without NUL. Otherwise it returns a
// *core.ConfigError of field "after" (wrapping core.ErrInvalidConfig),
// the error those methods return for it; a tool may check its input with
// it before it connects.
func CheckCursor(after string) error {
	if !storable(after) {
		return &core.ConfigError{Field: "after", Msg: fmt.Sprintf("must be an event id (valid UTF-8 without NUL), got %q", after)}
	}
	return nil
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
	return s.deadPageQuery(selectList(s.dialect), f, after, limit)
}

// deadPageQuery returns the query of a page of DEAD rows selecting cols,
// and its arguments.
func (s *Store) deadPageQuery(cols string, f DeadFilter, after string, limit int) (string, []any) {
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
	// A filter of type, tenant or time on MySQL/MariaDB: the DEAD range of
	// the hinted index, not the primary key walked until a page of matches
	// (a tenant without DEAD rows walked the whole table: 2.6 s on 1.5 M
	// rows). Ids alone are read by primary key.
	narrow := f.EventType != "" || len(f.IDs) == 0 && (f.TenantID != "" || !f.From.IsZero() || !f.To.IsZero())
	if hint := s.deadTypeHint.Load(); hint != nil && narrow {
		from += " " + *hint
	}
	q := sqlx.Rebind(s.dialect.BindType(), "SELECT "+cols+" FROM "+from+
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
	// BatchSize is the most rows changed per statement, 1..MaxListLimit
	// (each batch is read as one page of the dead letters). Defaults to
	// DefaultOpsBatch.
	BatchSize int
}

// Why ReplayDead or DiscardDead left an event it matched as it was
// (Unchanged.Reason).
const (
	// ReasonKeyWentOn: the event is ordered, under the skip policy
	// (core.SkipOnDead), and its key has a later event, in any status
	// (or had one since purged: a keys table remembers the key's last
	// position; on SQLite the purge keeps the key's last row): the
	// key went on without it, so a replay would deliver it after events
	// that followed it, perhaps while one of them is being delivered on
	// another node. ReplayDead leaves it DEAD.
	ReasonKeyWentOn = "its key went on without it under the skip policy; replaying would deliver it out of order: discard it, or publish a new event"
	// ReasonNoLongerDead: the event was DEAD when its batch was read but
	// no longer when the batch was written.
	ReasonNoLongerDead = "stopped being DEAD meanwhile (replayed or discarded elsewhere, or purged)"
)

// Unchanged is an event ReplayDead or DiscardDead matched (DEAD when its
// batch was read) but did not change, and why.
type Unchanged struct {
	ID     string // the event's id
	Reason string // ReasonKeyWentOn or ReasonNoLongerDead
}

// ReplayResult tells what ReplayDead did (or would do).
type ReplayResult struct {
	Matched  int // DEAD rows matching the filter
	Replayed int // rows moved back to NEW (0 in a dry run)
	// IDs are the ids replayed (in a dry run: that would be), in id
	// order.
	IDs []string
	// NotReplayed are the events matched but not replayed (in a dry run:
	// that would not be), with why, in id order. Matched is len(IDs) +
	// len(NotReplayed).
	NotReplayed []Unchanged
}

// ReplayDead moves matching DEAD events back to NEW with attempts 0, no
// error, no lease and due now, in batches of BatchSize (each its own short
// transaction). The poller then delivers them through the normal path;
// on a database that announces commits (a Notifier: PostgreSQL), each
// batch that replayed events wakes the pollers of every node.
// Batches are selected as ListDeadSummaries lists them: without reading
// the payloads and headers.
//
// An ordered event under the skip policy whose key went on without it (a
// later event exists, in any status, or existed and was purged since: a
// keys table remembers the key's last position on MySQL/MariaDB and
// PostgreSQL, and on SQLite Purge keeps the key's last row while such a
// DEAD event is there) is not replayed: its successors were
// delivered, or are being delivered, as if it had succeeded, and only the
// event right before an ordered event holds it back, so a replayed one
// would be delivered out of order, perhaps at the same time as a later
// event of its key on another node. It stays DEAD and is reported in
// NotReplayed with ReasonKeyWentOn: discard it, or publish a new event.
// The check is made when the batch is written, under the key's lock, so
// a transaction publishing on the key at that moment is waited for. An
// event under the block policy held its key, so nothing after it was
// delivered: it is replayed, and delivered before the later events.
//
// When ctx ends, ReplayDead returns what it replayed with ctx's error.
// A batch whose commit ctx cut short may have been committed all the
// same (PostgreSQL commits a COMMIT that reached it): its rows are read
// back, for up to 2 seconds more, and the batch is counted when it was
// committed. Should that read fail too, the error says that the batch
// may have been replayed, and how many events it held.
func (s *Store) ReplayDead(ctx context.Context, f DeadFilter, o ReplayOptions) (ReplayResult, error) {
	if ctx == nil {
		return ReplayResult{}, core.ErrNilContext
	}
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
		page, err := s.listSummaries(ctx, f, after, o.BatchSize)
		if err != nil {
			return res, err
		}
		if len(page) == 0 {
			return res, nil
		}
		res.Matched += len(page)
		after = page[len(page)-1].ID
		var replayed, wentOn map[string]bool
		if o.DryRun {
			var ok []any
			ok, wentOn, err = s.replayable(ctx, s.db, page, false)
			replayed = set(ok)
			if err != nil {
				err = s.mapError("replay dead: read", page[0].ID, err)
			}
		} else {
			if s.deadPageHook != nil {
				s.deadPageHook(page)
			}
			// A batch committed as ctx ended is counted (see
			// replayPage).
			replayed, wentOn, err = s.replayPage(ctx, page)
			res.Replayed += len(replayed)
		}
		if err != nil && replayed == nil {
			return res, err
		}
		res.IDs, res.NotReplayed = sortOut(page, replayed, wentOn, res.IDs, res.NotReplayed)
		if err != nil {
			return res, err
		}
	}
}

// sortOut appends to ids the ids of page in changed and to left the
// others, with ReasonKeyWentOn for those in wentOn and
// ReasonNoLongerDead for the rest, in the order of page.
func sortOut(page []DeadSummary, changed, wentOn map[string]bool, ids []string, left []Unchanged) ([]string, []Unchanged) {
	for _, r := range page {
		switch {
		case changed[r.ID]:
			ids = append(ids, r.ID)
		case wentOn[r.ID]:
			left = append(left, Unchanged{ID: r.ID, Reason: ReasonKeyWentOn})
		default:
			left = append(left, Unchanged{ID: r.ID, Reason: ReasonNoLongerDead})
		}
	}
	return ids, left
}

// keyWentOn is the condition of a row of page, in the store's table, that
// is an ordered event under the skip policy whose key has a later event,
// or, where the store keeps a keys table, whose key's last position is
// past it (a later event was committed, and perhaps purged since). Both
// subqueries read the order index or the keys table's primary key. The
// keys table is named only when page holds such an event, so replaying
// other events needs no privilege on it (an application publishing no
// ordered event may be granted the outbox table alone).
func (s *Store) keyWentOn(page []DeadSummary) string {
	t := s.dialect.QuoteIdent(s.table)
	c := t + ".order_key IS NOT NULL AND " + t + ".order_skip <> 0 AND (" + laterOfKey(t)
	if !s.dialect.Capabilities().SingleWriter && slices.ContainsFunc(page, underSkip) {
		c += " OR EXISTS (SELECT 1 FROM " + s.dialect.QuoteIdent(keysTable(s.table)) + " k WHERE k.order_key = " + t +
			".order_key AND k.last_seq > " + t + ".order_seq)"
	}
	return "(" + c + "))"
}

// replaySet is the SET clause of a replay: back to NEW, due at the first
// argument.
var replaySet = " SET status = " + strconv.Itoa(int(core.StatusNew)) + ", attempts = 0, available_at = ?, done_at = NULL, last_error = NULL, locked_by = NULL, locked_until = NULL"

// replayable reads, on q, which rows of page are still DEAD: those a
// replay may move back to NEW (ok, ids as statement arguments) and those
// whose key went on without them (wentOn). lock reads them FOR UPDATE.
func (s *Store) replayable(ctx context.Context, q queryer, page []DeadSummary, lock bool) (ok []any, wentOn map[string]bool, err error) {
	suffix := ") AND status = " + strconv.Itoa(int(core.StatusDead))
	if lock {
		suffix += " FOR UPDATE"
	}
	query := inList(s.dialect, "SELECT event_id, CASE WHEN "+s.keyWentOn(page)+" THEN 1 ELSE 0 END FROM "+s.dialect.QuoteIdent(s.table)+
		" WHERE event_id IN (", len(page), suffix)
	rows, err := q.QueryContext(ctx, query, pageIDs(page)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id   string
			went int
		)
		if err := rows.Scan(&id, &went); err != nil {
			return nil, nil, err
		}
		if went != 0 {
			if wentOn == nil {
				wentOn = map[string]bool{}
			}
			wentOn[id] = true
		} else {
			ok = append(ok, id)
		}
	}
	return ok, wentOn, rows.Err()
}

// replayPage moves the rows of page that are still DEAD, except those
// whose key went on without them, back to NEW, in one transaction, and
// returns the ids it moved and those it left because their key went on.
//
// The transaction first locks the keys-table rows of the page's ordered
// events under the skip policy (the lock a transaction publishing on the
// key holds until it ends), so the check sees every later event
// committed; on a single-writer database (SQLite) no publish can run
// meanwhile. Where the database has RETURNING (SQLite, PostgreSQL) the
// UPDATE checks each row itself and returns the ids it moved; elsewhere
// (MySQL/MariaDB) the rows are read FOR UPDATE with the check, and the
// UPDATE moves the locked rows that passed.
//
// When the commit fails (ctx ended while it ran), the rows are read back
// (see ownBatch): if the batch was committed all the same, what it did is
// returned with the error, so that the caller counts it.
func (s *Store) replayPage(ctx context.Context, page []DeadSummary) (replayed, wentOn map[string]bool, err error) {
	replayed, err = s.ownBatch(ctx, "replay dead", "replayed", page[0].ID, func(tx *sqlx.Tx) (map[string]bool, error) {
		var err error
		replayed, wentOn, err = s.replayIn(ctx, tx, page)
		if err != nil || len(replayed) == 0 {
			return replayed, err
		}
		return replayed, s.announce(ctx, tx) // the replayed rows are unowned: wake every node
	})
	if err != nil && replayed == nil { // not committed: nothing to count
		return nil, nil, err
	}
	return replayed, wentOn, err
}

// replayIn is replayPage's work in tx.
func (s *Store) replayIn(ctx context.Context, tx *sqlx.Tx, page []DeadSummary) (replayed, wentOn map[string]bool, err error) {
	d := s.dialect
	t := d.QuoteIdent(s.table)
	dead := strconv.Itoa(int(core.StatusDead))
	if err := s.lockSkipKeys(ctx, tx, page); err != nil {
		return nil, nil, err
	}
	now := d.EncodeTime(s.now())
	if !d.Capabilities().Returning {
		ok, went, err := s.replayable(ctx, tx, page, true)
		if err != nil || len(ok) == 0 {
			return nil, went, err
		}
		n, err := execCount(ctx, tx, inList(d, "UPDATE "+t+replaySet+" WHERE event_id IN (", len(ok), ") AND status = "+dead),
			append([]any{now}, ok...)...)
		if err != nil {
			return nil, nil, err
		}
		if n != int64(len(ok)) {
			return nil, nil, fmt.Errorf("moved %d of the %d rows it had locked", n, len(ok))
		}
		replayed = set(ok)
		return replayed, went, s.touchReplayedKeys(ctx, tx, page, replayed)
	}
	args := append([]any{now}, pageIDs(page)...)
	moved, err := queryIDs(ctx, tx, inList(d, "UPDATE "+t+replaySet+" WHERE event_id IN (", len(page),
		") AND status = "+dead+" AND NOT "+s.keyWentOn(page)+" RETURNING event_id"), len(page), args...)
	if err == nil {
		err = s.touchReplayedKeys(ctx, tx, page, moved)
	}
	if err != nil || len(moved) == len(page) {
		return moved, nil, err
	}
	// The rows of the page still DEAD were left for their key.
	var rest []any
	for _, r := range page {
		if !moved[r.ID] {
			rest = append(rest, r.ID)
		}
	}
	went, err := queryIDs(ctx, tx, inList(d, "SELECT event_id FROM "+t+" WHERE event_id IN (", len(rest), ") AND status = "+dead),
		len(rest), rest...)
	return moved, went, err
}

// lockSkipKeys locks, in tx, the keys-table rows of the ordered events
// under the skip policy in page, in key order; nothing where the store
// keeps no keys table (single-writer databases, where no publish runs
// while tx writes).
func (s *Store) lockSkipKeys(ctx context.Context, tx *sqlx.Tx, page []DeadSummary) error {
	if s.dialect.Capabilities().SingleWriter {
		return nil
	}
	keys := skipKeys(page)
	if len(keys) == 0 {
		return nil
	}
	_, err := queryIDs(ctx, tx, inList(s.dialect, "SELECT order_key FROM "+s.dialect.QuoteIdent(keysTable(s.table))+
		" WHERE order_key IN (", len(keys), ") ORDER BY order_key FOR UPDATE"), len(keys), keys...)
	return err
}

// touchReplayedKeys writes, in tx, to the keys-table rows of the events
// of page under the skip policy that were replayed (an UPDATE that
// changes no value; lockSkipKeys locked those rows already). Such an
// event holds its key again, and a transaction whose snapshot is older
// than this replay must not go on as if it did not: a REPEATABLE READ or
// SERIALIZABLE transaction on PostgreSQL reads the event before its own
// in that snapshot, still DEAD, and would insert its event with the hot
// lease, delivered before or alongside the replayed one. A row that was
// merely locked lets its upsert of the key's next position through; a row
// changed since its snapshot fails it with a serialization error (SQLSTATE
// 40001), as a concurrent publish on the key does.
func (s *Store) touchReplayedKeys(ctx context.Context, tx *sqlx.Tx, page []DeadSummary, replayed map[string]bool) error {
	if s.dialect.Capabilities().SingleWriter || len(replayed) == 0 {
		return nil
	}
	var moved []DeadSummary
	for _, r := range page {
		if replayed[r.ID] {
			moved = append(moved, r)
		}
	}
	keys := skipKeys(moved)
	if len(keys) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, inList(s.dialect, "UPDATE "+s.dialect.QuoteIdent(keysTable(s.table))+
		" SET last_seq = last_seq WHERE order_key IN (", len(keys), ")"), keys...)
	return err
}

// skipKeys returns the keys of the ordered events under the skip policy
// in page, sorted, each once, as query arguments.
func skipKeys(page []DeadSummary) []any {
	var keys []string
	for _, r := range page {
		if underSkip(r) {
			keys = append(keys, r.OrderKey)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	return args
}

// underSkip reports whether r is an ordered event under the skip policy.
func underSkip(r DeadSummary) bool { return r.OrderKey != "" && r.OnDead == core.SkipOnDead }

// ownTx runs fn in a transaction of the store's own, under the write
// gate (single-writer databases) and READ COMMITTED where rows lock (each
// statement then reads the latest committed rows), run again as a whole
// while the database reports lock contention: fn must start afresh.
func (s *Store) ownTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	ctx, release, err := s.gate.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	var opts *sql.TxOptions
	if s.dialect.Capabilities().SkipLocked {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return retryTx(ctx, s, opts, fn)
}

// commitCheckTimeout bounds the read with which ownBatch settles a batch
// whose commit failed: it runs after the caller's context ended.
const commitCheckTimeout = 2 * time.Second

// ownBatch runs fn, a batch of op (its name in errors: "replay dead",
// "discard dead") on the page whose first id is firstID, as ownTx does,
// fn returning the ids of the DEAD rows it changed (moved back to NEW or
// deleted), and returns those ids once the batch was committed (nil when
// it was not) with the error, if any. When fn succeeded but the commit
// failed, the client cannot tell whether the server committed: a COMMIT
// that reached PostgreSQL is applied even when the context ends before
// its answer comes back (the cancel comes too late, and the client gives
// up waiting). ownBatch then reads those rows back, under a context of
// its own that keeps ctx's values but not its end, bounded by
// commitCheckTimeout: the batch was committed when none of them is DEAD
// any more (a transaction changes all of its rows or none; a concurrent
// replay, discard or purge of those rows by someone else after a
// rollback would read the same, and count them as this batch's). Where
// rows lock, the read locks them, so it waits for a commit the server is
// still running. Should the read fail, the error says that the batch, of
// so many events, may have been verb ("replayed", "discarded") all the
// same.
func (s *Store) ownBatch(ctx context.Context, op, verb, firstID string, fn func(tx *sqlx.Tx) (map[string]bool, error)) (map[string]bool, error) {
	var changed map[string]bool // by the last run of fn, if it succeeded
	err := s.ownTx(ctx, func(tx *sqlx.Tx) error {
		changed = nil
		ids, err := fn(tx)
		if err == nil {
			changed = ids
		}
		return err
	})
	if err == nil {
		return changed, nil
	}
	err = s.mapError(op, firstID, err)
	if len(changed) == 0 {
		return nil, err // fn failed, or changed nothing: nothing to count
	}
	ids := make([]any, 0, len(changed))
	for id := range changed {
		ids = append(ids, id)
	}
	suffix := ") AND status = " + strconv.Itoa(int(core.StatusDead))
	if !s.dialect.Capabilities().SingleWriter {
		suffix += " FOR UPDATE"
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitCheckTimeout)
	defer cancel()
	still, qerr := queryIDs(cctx, s.db, inList(s.dialect, "SELECT event_id FROM "+s.dialect.QuoteIdent(s.table)+
		" WHERE event_id IN (", len(ids), suffix), len(ids), ids...)
	switch {
	case qerr != nil:
		return nil, fmt.Errorf("%w; its last batch, of %d %s, may have been %s all the same: the commit was cut short and reading the rows back failed: %w",
			err, len(changed), plural(len(changed)), verb, qerr)
	case len(still) == 0:
		return changed, err
	}
	return nil, err
}

// plural is "event" or "events".
func plural(n int) string {
	if n == 1 {
		return "event"
	}
	return "events"
}

// set returns ids (strings) as a set.
func set(ids []any) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id.(string)] = true
	}
	return m
}

// pageIDs returns the ids of page as statement arguments.
func pageIDs(page []DeadSummary) []any {
	ids := make([]any, len(page))
	for i, r := range page {
		ids[i] = r.ID
	}
	return ids
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
