package jdbcstore

import (
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// recordColumns are the columns every read selects, in the order
// scanRecord expects them.
var recordColumns = []string{
	"event_id", "event_type", "aggregate_type", "aggregate_id", "tenant_id",
	"occurred_at", "payload", "payload_kind", "headers", "status", "attempts",
	"available_at", "created_at", "done_at", "last_error",
	"locked_by", "locked_until", "order_key", "order_seq", "order_skip",
}

// timeColumns are the recordColumns holding instants.
var timeColumns = map[string]bool{"occurred_at": true, "available_at": true, "created_at": true, "done_at": true, "locked_until": true}

// selectList is the SELECT list of recordColumns for d: time columns go
// through the dialect's selectTime when it has one.
func selectList(d Dialect) string {
	ts, ok := d.(TimeSelector)
	if !ok {
		return strings.Join(recordColumns, ", ")
	}
	exprs := make([]string, len(recordColumns))
	for i, c := range recordColumns {
		exprs[i] = c
		if timeColumns[c] {
			exprs[i] = ts.SelectTime(c)
		}
	}
	return strings.Join(exprs, ", ")
}

// statements holds the SQL text of every operation for one dialect and
// table, built once by New. The comment of each field gives the order of
// its arguments; the store encodes them with the dialect.
type statements struct {
	// insert: event_id, event_type, aggregate_type, aggregate_id,
	// tenant_id, occurred_at, payload, payload_kind, headers,
	// available_at, created_at, locked_by, locked_until, order_key,
	// order_seq, order_skip.
	insert string
	// insertPrefix + n × insertRow, comma-separated (+ insertSuffix): the
	// multi-row insert of a batch, with '?' placeholders (Store.batchSQL
	// rebinds it): insert's arguments for each row. insertSuffix makes a
	// duplicate no row (returning the ids inserted) where a failed
	// statement aborts the transaction.
	insertPrefix, insertRow, insertSuffix string
	// nextSeq takes the next position of a key under the key row's lock:
	// order_key. It returns last_seq (RETURNING), or, with
	// nextSeqByInsertID (ON DUPLICATE KEY UPDATE dialects), sets it as the
	// statement's last insert id.
	nextSeq           string
	nextSeqByInsertID bool
	// With Capabilities.PredecessorByID, once the keys table is known to
	// have the id columns (Store.keyIDs): nextSeqByID is nextSeq that
	// also records the event's id (order_key, event_id, event_id);
	// insertIfFreeByID is insertIfFree reading the event before by the
	// id the keys row recorded, inserting nothing when it recorded none
	// (insert's arguments, then order_key, order_key);
	// giveBackByID is giveBack that forgets the recorded ids; keysProbe
	// fails unless the keys table has the id columns.
	nextSeqByID, insertIfFreeByID, giveBackByID, keysProbe string
	// giveBack returns positions a transaction took but did not use:
	// positions to give back, order_key, the last position it took (the
	// key's last_seq, which it still holds under the key row's lock).
	giveBack string
	// insertIfFree is insert that inserts nothing while the event before
	// still holds the key: insert's arguments, then order_key and the
	// position of the event before.
	insertIfFree string
	// waitingPrefix + n placeholders + waitingSuffix: order_keys, now.
	// One row when a pending event of one of them has no owner, or an
	// owner whose lease ended before now.
	waitingPrefix, waitingSuffix string
	// lastOfKey (single-writer dialects: SQLite, which need no keys
	// table): order_key. At most one row (order_seq, status, order_skip):
	// the key's last event.
	lastOfKey string
	// insertAfterFinished (with lastOfKey) is insert that inserts nothing
	// unless the key has an event at the position given, finished (it no
	// longer holds the key): insert's arguments, then order_key and that
	// position.
	insertAfterFinished string
	// markDonePrefix + n placeholders + markDoneSuffix: done_at, ids...,
	// owner. markDone1 is the one-id statement.
	markDonePrefix, markDoneSuffix, markDone1 string
	// markRetry: available_at, locked_until, last_error, event_id, owner.
	markRetry string
	// markDead: done_at (when it finished), last_error, event_id, owner.
	markDead string
	// postpone: available_at, last_error, event_id, owner.
	postpone string
	// poll: now (available_at bound), now-skipRecent (created_at bound), limit.
	poll string
	// claimable is the WHERE clause of claimable rows: now (available_at),
	// now-skipRecent (created_at), now (lease expired), owner.
	claimable string
	// claimReturning (RETURNING dialects): owner, lease_until, then the
	// claimable arguments, then limit. With claimPerStatus the claimable
	// arguments and limit come twice (NEW, then RETRY), then limit again.
	claimReturning string
	// claimPerStatus: the claim reads NEW and RETRY rows apart (see
	// claimOrdered).
	claimPerStatus bool
	// claimSelect (SKIP LOCKED dialects): the claimable arguments, limit.
	// With claimPerStatus it reads NEW rows and claimSelectRetry, with
	// the same arguments, RETRY rows.
	claimSelect, claimSelectRetry string
	// claimUpdatePrefix + n placeholders + ")": owner, lease_until, ids...
	claimUpdatePrefix string
	// ClaimNext's statements: prefix + n position terms
	// "(order_key = ? AND order_seq = ?)" joined by OR + suffix (see
	// positionList). claimNextPrefix (or claimNextPinned, naming the order
	// index, on SQLite) + claimNextSuffix (RETURNING dialects): owner,
	// lease_until, each position's key and seq, the claimable arguments.
	// selectNextPrefix + selectNextSuffix (SKIP LOCKED dialects): each
	// position's key and seq, the claimable arguments. lockedNextPrefix
	// + lockedNextSuffix (SKIP LOCKED dialects): the same, a plain read
	// of the (order_key, order_seq) of those rows. positionsPrefix + n
	// placeholders + positionsSuffix: n event ids, now (lease expired);
	// the (order_key, order_seq) of those ordered rows behind which an
	// event waits for a poller. laterNextPrefix + laterNextSuffix: each
	// position's key and seq, now (not due), now (lease expired); the
	// key, seq and available_at of those unowned pending rows not due yet.
	claimNextPrefix, claimNextPinned, claimNextSuffix string
	laterNextPrefix, laterNextSuffix                  string
	selectNextPrefix, selectNextSuffix                string
	lockedNextPrefix, lockedNextSuffix                string
	positionsPrefix, positionsSuffix                  string
	// heldPrefix + positions + heldSuffix (SKIP LOCKED dialects): of the
	// given positions, those whose event holds its key (see heldBack).
	heldPrefix, heldSuffix string
	// pollPinned and claimPinned are poll and claimReturning naming the
	// pending index (SQLite's INDEXED BY), for a store whose schema has it
	// (Store.pinPending); "" for other dialects.
	pollPinned, claimPinned string
	// reap (dialects without SKIP LOCKED): now, limit; with reapNowTwice
	// now, now, limit.
	reap         string
	reapNowTwice bool
	// reapPick (dialects with SKIP LOCKED, in place of reap): now, limit;
	// the ids of rows with an expired lease that no transaction holds,
	// locked. reapByIDPrefix + n placeholders + reapByIDSuffix: the ids,
	// then now.
	reapPick, reapByIDPrefix, reapByIDSuffix string
	// release (+ releaseExceptPrefix + n placeholders + ")"): owner, then
	// the ids to keep.
	release, releaseExceptPrefix string
	// extendPrefix + n placeholders + ")": lease end, owner, ids...
	extendPrefix string
	// get: event_id.
	get string
	// exists: event_id (one row if the event exists).
	exists string
	// countByStatus: no arguments. One row: the counts of the NEW, DONE,
	// RETRY and DEAD rows or, with countFromTotal (single-writer
	// dialects), of every row, then of the NEW, RETRY and DEAD rows.
	countByStatus  string
	countFromTotal bool
	// oldestPending: no arguments. One row: the earliest created_at of
	// the NEW/RETRY rows (through the dialect's time selector), NULL when
	// none.
	oldestPending string
	// firstDue: no arguments. One row: the earliest available_at of the
	// NEW/RETRY rows that wait for no earlier event of their key (through
	// the dialect's time selector), NULL when none: the first such entry
	// of the pending index (MySQL/MariaDB: of its two status ranges).
	firstDue string
	// deadByType: no arguments. (event_type, count) of the DEAD rows.
	// deadByTypePinned reads them from the dead index (SQLite's INDEXED
	// BY, Store.pinDead); "" for other dialects.
	deadByType, deadByTypePinned string
	// countBlocked: no arguments. One row: the number of ordering keys
	// held by a DEAD event under the block policy.
	countBlocked string
	// purgePage: status, lower bound, cutoff, limit. The next rows of a
	// status finished in [lower bound, cutoff), as (event_id, done_at),
	// in done_at order: one range of the done index.
	purgePage string
	// purgeLegacyPage: cutoff, after, limit. DEAD rows without done_at
	// (written before DEAD rows carried it) created before cutoff, whose
	// id sorts after after, as (event_id), in id order.
	purgeLegacyPage string
	// purgeDelete(Legacy)Prefix + n placeholders + purgeDelete(Legacy)Suffix:
	// ids..., status, cutoff (purgeDeleteSuffix) or cutoff
	// (purgeDeleteLegacySuffix). The conditions of the page are checked
	// again, so a row replayed meanwhile is kept.
	purgeDeletePrefix, purgeDeleteSuffix, purgeDeleteLegacySuffix string
	// purgeBatch (single-writer databases): status, cutoff, limit. Deletes
	// the first rows of a status finished before cutoff, in done_at order.
	purgeBatch string
	// purgeCount: status, cutoff. purgeLegacyCount: cutoff. One row each:
	// what the pages would find (a dry run).
	purgeCount, purgeLegacyCount string
	// notify and notifyArgs: the announcement of an unowned event
	// (Notifier dialects), "" otherwise.
	notify     string
	notifyArgs []any
}

// buildStatements writes the statements with '?' placeholders, quotes the
// table with the dialect and rebinds the placeholders to its bind type.
// Status values come from core's constants; no value is ever formatted
// into the text.
func buildStatements(d Dialect, table string) statements {
	t := d.QuoteIdent(table)
	cols := selectList(d)
	st := func(s core.Status) string { return strconv.Itoa(int(s)) }
	notDone := " AND status <> " + st(core.StatusDone) + " AND locked_by = ?"
	releaseLease := ", locked_by = NULL, locked_until = NULL"
	pending := "status IN (" + st(core.StatusNew) + ", " + st(core.StatusRetry) + ")"
	order := " ORDER BY available_at, created_at, event_id"

	insertInto := "INSERT INTO " + t + " (event_id, event_type, aggregate_type, aggregate_id, tenant_id," +
		" occurred_at, payload, payload_kind, headers, status, attempts, available_at, created_at," +
		" locked_by, locked_until, order_key, order_seq, order_skip)"
	insertValues := "?, ?, ?, ?, ?, ?, ?, ?, ?, " + st(core.StatusNew) + ", 0, ?, ?, ?, ?, ?, ?, ?"

	// A row created within SkipRecent is left to the hot path, unless it
	// was published with a later due time (a delayed event, or a retry):
	// it is claimable as soon as it is due.
	notRecent := "(created_at <= ? OR available_at > created_at)"
	// ready is the condition that a pending row waits for no event of its
	// key: the event before it in its key has finished (DONE, deleted,
	// or DEAD under the skip policy); an unordered row (order_key NULL)
	// matches no row in the subquery. Written without "order_key IS NULL
	// OR", which kept PostgreSQL from an anti-join: it checked the
	// predecessors against a hash of every pending and DEAD row instead
	// (1.5 M rows, 22,000 DEAD: ~200 ms a claim, against ~2 ms reading the
	// order index per row).
	ready := "NOT EXISTS (SELECT 1 FROM " + t + " p WHERE p.order_key = " + t + ".order_key" +
		" AND p.order_seq = " + t + ".order_seq - 1 AND " + holdsKey("p.") + ")"
	// byID is the table as the status writes, which name their rows by
	// id, update it. The MySQL family: by primary key, whatever the
	// optimizer estimates. On a small table it chose to scan it, taking
	// next-key locks (REPEATABLE READ) on every row and gap it passed, so
	// a DONE write waiting for a row an ordered insert had read held the
	// gap an unordered insert of the same business transaction needed:
	// a deadlock, and the business transaction rolled back.
	byID := t
	if d.Capabilities().OnDuplicateKeyUpdate {
		byID = t + " FORCE INDEX (PRIMARY)"
	}
	q := statements{
		insert:       insertInto + " VALUES (" + insertValues + ")",
		insertPrefix: insertInto + " VALUES ",
		insertRow:    "(" + insertValues + ")",
		markDonePrefix: "UPDATE " + byID + " SET status = " + st(core.StatusDone) + ", done_at = ?" +
			releaseLease + " WHERE event_id IN (",
		markDoneSuffix: ")" + notDone,
		markRetry: "UPDATE " + byID + " SET status = " + st(core.StatusRetry) +
			", attempts = attempts + 1, available_at = ?, locked_until = ?, last_error = ?" +
			" WHERE event_id = ?" + notDone,
		markDead: "UPDATE " + byID + " SET status = " + st(core.StatusDead) +
			", attempts = attempts + 1, done_at = ?, last_error = ?" + releaseLease + " WHERE event_id = ?" + notDone,
		postpone: "UPDATE " + byID + " SET available_at = ?, last_error = ?" + releaseLease + " WHERE event_id = ?" + notDone,
		poll: "SELECT " + cols + " FROM " + t + " WHERE " + pending +
			" AND available_at <= ? AND " + notRecent + order + " LIMIT ?",
		// An ordered row is claimable only when it is ready. The
		// subquery is a plain read (locking clauses do not reach nested
		// subqueries), so a claimer on another node that holds the
		// predecessor's row lock cannot make it look finished.
		claimable: pending + " AND available_at <= ? AND " + notRecent +
			" AND (locked_by IS NULL OR locked_until < ? OR locked_by = ?) AND " + ready,
		get:           "SELECT " + cols + " FROM " + t + " WHERE event_id = ?",
		exists:        "SELECT 1 FROM " + t + " WHERE event_id = ?",
		oldestPending: "SELECT " + timeExpr(d, "MIN(created_at)") + " FROM " + t + " WHERE " + pending,
		firstDue:      firstDueQuery(d, t, pending, ready),
		deadByType:    "SELECT event_type, COUNT(*) FROM " + t + " WHERE status = " + st(core.StatusDead) + " GROUP BY " + typeKey(d),
		countBlocked: "SELECT COUNT(DISTINCT order_key) FROM " + t + " WHERE status = " + st(core.StatusDead) +
			" AND order_key IS NOT NULL AND order_skip = 0",
	}
	// The retention purge walks the done index (status, done_at) one range
	// at a time, each page starting where the last ended: it never scans
	// rows it keeps nor, on databases that clean deleted index entries
	// later (InnoDB, PostgreSQL), the entries of the rows it deleted.
	legacy := "status = " + st(core.StatusDead) + " AND done_at IS NULL AND created_at < ?"
	finished := finishedTerm(d)
	q.purgePage = "SELECT event_id, " + timeExpr(d, "done_at") + " FROM " + t +
		" WHERE " + finished + "status = ? AND done_at >= ? AND done_at < ? ORDER BY done_at LIMIT ?"
	q.purgeLegacyPage = "SELECT event_id FROM " + t + " WHERE " + legacy + " AND event_id > ? ORDER BY event_id LIMIT ?"
	q.purgeDeletePrefix = "DELETE FROM " + t + " WHERE event_id IN ("
	q.purgeDeleteSuffix = ") AND status = ? AND done_at < ?"
	q.purgeDeleteLegacySuffix = ") AND " + legacy
	// A single-writer database (SQLite) keeps no row versions: a deleted
	// row leaves its indexes at commit, so each batch's range starts at a
	// live row, and one statement per batch, with no ids through the
	// driver, does the page and the delete.
	//
	// Without a keys table to remember a key's last position (SQLite),
	// the purge keeps the last row of a key behind a DEAD event under
	// the skip policy: that row is what tells a replay that the key went
	// on without the DEAD event (Store.ReplayDead leaves it DEAD), and
	// what gives the key's next event its position. One row per such key,
	// until the DEAD event is purged, replayed or discarded.
	purgeable := ""
	if d.Capabilities().SingleWriter {
		purgeable = " AND (order_key IS NULL OR " + laterOfKey(t) + " OR NOT EXISTS (SELECT 1 FROM " + t + " p WHERE p.order_key = " +
			t + ".order_key AND p.order_seq < " + t + ".order_seq AND p.status = " + st(core.StatusDead) + " AND p.order_skip <> 0))"
		q.purgeBatch = "DELETE FROM " + t + " WHERE event_id IN (SELECT event_id FROM " + t +
			" WHERE " + finished + "status = ? AND done_at < ?" + purgeable + " ORDER BY done_at LIMIT ?)"
	}
	q.purgeCount = "SELECT COUNT(*) FROM " + t + " WHERE " + finished + "status = ? AND done_at < ?" + purgeable
	q.purgeLegacyCount = "SELECT COUNT(*) FROM " + t + " WHERE " + legacy
	// The insert of an ordered event that takes the hot lease only if the
	// event before has finished, in the same statement: an INSERT ...
	// SELECT whose subquery reads the latest committed rows (a locking
	// read of a write statement under InnoDB's REPEATABLE READ, a new
	// snapshot per statement under READ COMMITTED, one writer at a time
	// in SQLite), so a predecessor committed after the transaction's
	// first read is seen.
	fromDual := ""
	if d.Capabilities().OnDuplicateKeyUpdate {
		fromDual = " FROM DUAL" // the MySQL family: a WHERE needs a FROM
	}
	q.insertIfFree = insertInto + " SELECT " + insertValues + fromDual +
		" WHERE NOT EXISTS (SELECT 1 FROM " + t + " p WHERE p.order_key = ? AND p.order_seq = ? AND " + holdsKey("p.") + ")"
	if d.Capabilities().SingleWriter {
		// One writer at a time: the key's last row cannot change between
		// this read and the insert in the same write transaction, so the
		// next position is that row's plus one, and no keys table is kept.
		q.lastOfKey = "SELECT order_seq, status, order_skip FROM " + t + " WHERE order_key = ? ORDER BY order_seq DESC LIMIT 1"
		// The insert at the position after the one a store remembers as
		// its key's last, DONE: the event must still be there, and
		// finished. The purge may have removed it and another process
		// published on the key since, starting again at position 1; the
		// trigger only refuses a position at or below an existing one.
		q.insertAfterFinished = sqlx.Rebind(d.BindType(), insertInto+" SELECT "+insertValues+fromDual+
			" WHERE EXISTS (SELECT 1 FROM "+t+" p WHERE p.order_key = ? AND p.order_seq = ? AND NOT "+holdsKey("p.")+")")
	}
	if d.Capabilities().FailedStatementAbortsTx {
		// A duplicate must not abort the caller's transaction: it shows
		// as no row inserted.
		q.insert += " ON CONFLICT (event_id) DO NOTHING"
		q.insertIfFree += " ON CONFLICT (event_id) DO NOTHING"
		q.insertSuffix = " ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
	}
	q.markDone1 = q.markDonePrefix + "?" + q.markDoneSuffix
	q.waitingPrefix = "SELECT 1 FROM " + t + " WHERE order_key IN ("
	q.waitingSuffix = ") AND " + pending + " AND (locked_by IS NULL OR locked_until < ?) LIMIT 1"
	k := d.QuoteIdent(keysTable(table))
	if d.Capabilities().OnDuplicateKeyUpdate {
		q.nextSeq = "INSERT INTO " + k + " (order_key, last_seq) VALUES (?, LAST_INSERT_ID(1))" +
			" ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID(last_seq + 1)"
		q.nextSeqByInsertID = true
	} else {
		q.nextSeq = "INSERT INTO " + k + " (order_key, last_seq) VALUES (?, 1)" +
			" ON CONFLICT (order_key) DO UPDATE SET last_seq = " + k + ".last_seq + 1 RETURNING last_seq"
	}
	q.giveBack = "UPDATE " + k + " SET last_seq = last_seq - ? WHERE order_key = ? AND last_seq = ?"
	if d.Capabilities().PredecessorByID && q.nextSeqByInsertID {
		// The keys row records the id of the key's last event and the
		// position it took (id_seq), and, when it takes the next one, the
		// id of the event before (prev_id), which is the one at the new
		// position minus one only while id_seq = last_seq: a position
		// given back (giveBackByID clears id_seq), or taken by a process
		// of an earlier release (which leaves the ids alone), records no
		// id. The assignments read the row's former values, whether the
		// server evaluates them left to right (MySQL) or all at once
		// (MariaDB's SIMULTANEOUS_ASSIGNMENT).
		q.nextSeqByID = "INSERT INTO " + k + " (order_key, last_seq, last_id, id_seq) VALUES (?, LAST_INSERT_ID(1), ?, 1)" +
			" ON DUPLICATE KEY UPDATE prev_id = CASE WHEN id_seq = last_seq THEN last_id END, last_id = ?," +
			" id_seq = last_seq + 1, last_seq = LAST_INSERT_ID(last_seq + 1)"
		// The event before, read by primary key (a record lock, no gap),
		// through the keys row this transaction locked. A row that
		// recorded no id takes no lease: the event waits for a poller,
		// whose claim checks the order (a read by position here would
		// lock the gap, whatever the row says: the planner reads both
		// tables of such a subquery before the condition on the keys row).
		q.insertIfFreeByID = insertInto + " SELECT " + insertValues + fromDual +
			" WHERE NOT EXISTS (SELECT 1 FROM " + k + " k JOIN " + t + " p ON p.event_id = k.prev_id" +
			" WHERE k.order_key = ? AND " + holdsKey("p.") + ")" +
			" AND EXISTS (SELECT 1 FROM " + k + " k WHERE k.order_key = ? AND k.prev_id IS NOT NULL)"
		q.giveBackByID = "UPDATE " + k + " SET last_seq = last_seq - ?, id_seq = NULL WHERE order_key = ? AND last_seq = ?"
		q.keysProbe = "SELECT last_id, id_seq, prev_id FROM " + k + " WHERE 1 = 0"
	}
	claimableIn := func(s core.Status) string {
		return strings.Replace(q.claimable, pending, "status = "+st(s), 1)
	}
	q.claimReturning = "UPDATE " + t + " SET locked_by = ?, locked_until = ? WHERE event_id IN (SELECT event_id FROM " + t +
		" WHERE " + q.claimable + order + " LIMIT ?" + skipLocked(d) + ") RETURNING " + cols
	q.claimSelect = "SELECT " + cols + " FROM " + t + " WHERE " + q.claimable + order + " LIMIT ? FOR UPDATE SKIP LOCKED"
	if pinsPending(d) {
		// SQLite plans without statistics until ANALYZE: on a new or
		// never-analyzed table with a (status, done_at) index over every
		// row (the schema before the partial index of finished rows), it
		// read "status IN (0, 2)" from that index and sorted every pending
		// row, on every claim (a backlog of 200,000 rows: ~10 ms per claim,
		// holding the write lock). The partial pending index is in claim
		// order; naming it keeps the plan whatever the other indexes.
		pinned := t + " INDEXED BY " + d.QuoteIdent(pendingIndex(table))
		q.pollPinned = strings.Replace(q.poll, " FROM "+t+" WHERE ", " FROM "+pinned+" WHERE ", 1)
		q.claimPinned = "UPDATE " + t + " SET locked_by = ?, locked_until = ? WHERE event_id IN (SELECT event_id FROM " + pinned +
			" WHERE " + q.claimable + order + " LIMIT ?" + skipLocked(d) + ") RETURNING " + cols
		// Without statistics SQLite reads the DEAD rows' types from the
		// table, one lookup per row; the dead index holds them.
		q.deadByTypePinned = strings.Replace(q.deadByType, " FROM "+t+" WHERE ", " FROM "+t+" INDEXED BY "+d.QuoteIdent(deadIndex(table))+" WHERE ", 1)
	}
	// Each status's count reads its own range of the status index: a count
	// grouped by status reads every entry and aggregates it (1,000,000
	// rows: MariaDB ~300 against ~120 ms, PostgreSQL ~70 against ~40 ms).
	// SQLite counts a whole table from its smallest index's pages without
	// reading the entries (~1 ms against ~30 ms for the DONE range): there
	// DONE is the rest. One statement reads one snapshot.
	count := func(s core.Status) string {
		return "(SELECT COUNT(*) FROM " + t + " WHERE " + statusTerm(d, s) + ")"
	}
	newRows := count(core.StatusNew)
	if d.Capabilities().FinishedIndex {
		// The pending index holds NEW and RETRY rows but not their status,
		// the retry index the RETRY rows: both counted from their entries,
		// where a count of NEW rows would read a row per pending event (a
		// backlog of 200,000 rows: ~8 against ~100 ms).
		newRows = "((SELECT COUNT(*) FROM " + t + " WHERE " + pending + ") - " + count(core.StatusRetry) + ")"
	}
	if q.countFromTotal = d.Capabilities().SingleWriter; q.countFromTotal {
		q.countByStatus = "SELECT (SELECT COUNT(*) FROM " + t + "), " + newRows + ", " + count(core.StatusRetry) + ", " + count(core.StatusDead)
	} else {
		q.countByStatus = "SELECT " + newRows + ", " + count(core.StatusDone) + ", " + count(core.StatusRetry) + ", " + count(core.StatusDead)
	}
	if q.claimPerStatus = claimOrdered(d); q.claimPerStatus {
		// Each status read apart follows the index in claim order and
		// stops after limit rows; the union of both heads, ordered and
		// cut again, is the claim.
		head := func(s core.Status) string {
			return "SELECT event_id, available_at, created_at FROM (SELECT event_id, available_at, created_at FROM " + t +
				" WHERE " + claimableIn(s) + order + " LIMIT ?) h" + st(s)
		}
		q.claimReturning = "UPDATE " + t + " SET locked_by = ?, locked_until = ? WHERE event_id IN (SELECT event_id FROM (" +
			head(core.StatusNew) + " UNION ALL " + head(core.StatusRetry) + ") heads" + order + " LIMIT ?) RETURNING " + cols
		q.claimSelect = "SELECT " + cols + " FROM " + t + " WHERE " + claimableIn(core.StatusNew) + order + " LIMIT ? FOR UPDATE SKIP LOCKED"
		q.claimSelectRetry = "SELECT " + cols + " FROM " + t + " WHERE " + claimableIn(core.StatusRetry) + order + " LIMIT ? FOR UPDATE SKIP LOCKED"
	}
	q.claimUpdatePrefix = "UPDATE " + t + " SET locked_by = ?, locked_until = ? WHERE event_id IN ("
	q.nextStatements(d, table)
	expired := pending + " AND locked_by IS NOT NULL AND locked_until < ?"
	switch {
	case d.Capabilities().SkipLocked: // see Store.reapUnlocked
		q.reapPick = "SELECT event_id FROM " + t + " WHERE " + expired + " LIMIT ? FOR UPDATE SKIP LOCKED"
		q.reapByIDPrefix = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE event_id IN ("
		q.reapByIDSuffix = ") AND " + expired
	case d.Capabilities().UpdateOrderLimit:
		q.reap = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE " + expired + " LIMIT ?"
	case d.Capabilities().SingleWriter: // no claim can run between the subquery and the update
		q.reap = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE event_id IN (SELECT event_id FROM " + t +
			" WHERE " + expired + " LIMIT ?)"
	default:
		// The condition is stated again outside the subquery: a row the
		// subquery picked that a claim leased meanwhile is re-read by the
		// UPDATE (PostgreSQL rechecks the outer WHERE only), and must not
		// lose its new lease.
		q.reap = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE " + expired + " AND event_id IN (SELECT event_id FROM " + t +
			" WHERE " + expired + " LIMIT ?)"
		q.reapNowTwice = true
	}
	q.release = "UPDATE " + t + " SET locked_by = NULL, locked_until = NULL WHERE " + pending + " AND locked_by = ?"
	q.releaseExceptPrefix = q.release + " AND event_id NOT IN ("
	q.extendPrefix = "UPDATE " + t + " SET locked_until = ? WHERE " + pending + " AND locked_by = ? AND event_id IN ("
	if n, ok := d.(Notifier); ok {
		q.notify, q.notifyArgs = n.NotifyStatement(table)
	}
	bt := d.BindType()
	for _, p := range []*string{&q.notify, &q.insert, &q.nextSeq, &q.giveBack, &q.insertIfFree,
		&q.nextSeqByID, &q.insertIfFreeByID, &q.giveBackByID, &q.keysProbe, &q.lastOfKey, &q.markDone1, &q.markRetry, &q.markDead, &q.postpone, &q.poll,
		&q.claimReturning, &q.claimSelect, &q.claimSelectRetry, &q.pollPinned, &q.claimPinned, &q.reap, &q.reapPick, &q.release, &q.get, &q.exists, &q.countByStatus,
		&q.purgePage, &q.purgeLegacyPage, &q.purgeBatch, &q.purgeCount, &q.purgeLegacyCount} {
		*p = sqlx.Rebind(bt, *p)
	}
	return q
}

// timeExpr wraps a time expression the way the dialect reads time
// columns.
func timeExpr(d Dialect, expr string) string {
	if ts, ok := d.(TimeSelector); ok {
		return ts.SelectTime(expr)
	}
	return expr
}

// claimOrdered reports whether d's claims read NEW and RETRY rows apart:
// every dialect whose schema does not index the pending rows alone, in
// claim order (Capabilities.PendingIndex: SQLite and PostgreSQL do). The
// status index of the others (status, available_at, created_at) gives the
// claim order for one status at a time: a claim of "status IN (NEW,
// RETRY) ORDER BY …" would sort every pending row on each claim (a
// filesort over the whole backlog), one per status reads just its first
// rows.
func claimOrdered(d Dialect) bool {
	return !d.Capabilities().PendingIndex
}

// laterOfKey is the condition that the row of table t (quoted) in scope
// has a later event of its ordering key, in any status: one probe of the
// order index.
func laterOfKey(t string) string {
	return "EXISTS (SELECT 1 FROM " + t + " n WHERE n.order_key = " + t + ".order_key AND n.order_seq > " + t + ".order_seq)"
}

// firstDueQuery is the firstDue query of table t (quoted): the first entry
// of the pending index where the schema has one (Capabilities.PendingIndex),
// else (a (status, available_at) index: MySQL/MariaDB) the first entry of
// each pending status's range, as a MIN over an IN list of statuses reads
// the whole of both ranges; in either, the first entry whose row is ready
// (its key's earlier event finished), as a claim would take it: the rows
// waiting behind an unfinished event of their key (a DEAD one blocking
// it, counted as a blocked key, or one in its retry's backoff) are read
// past, one probe of the order index each, as claims read them.
func firstDueQuery(d Dialect, t, pending, ready string) string {
	first := func(status string) string {
		return "(SELECT available_at AS due FROM " + t + " WHERE " + status + " AND " + ready + " ORDER BY available_at LIMIT 1)"
	}
	if d.Capabilities().PendingIndex {
		return "SELECT " + timeExpr(d, "MIN(due)") + " FROM " + first(pending) + " f"
	}
	status := func(s core.Status) string { return "status = " + strconv.Itoa(int(s)) }
	return "SELECT " + timeExpr(d, "MIN(due)") + " FROM (" + first(status(core.StatusNew)) + " UNION ALL " + first(status(core.StatusRetry)) + ") f"
}

// finishedTerm is the condition that lets a statement reading finished
// rows by status use a partial index of them ([Capabilities.FinishedIndex]),
// followed by " AND ", or "" when the schema indexes every row by status.
func finishedTerm(d Dialect) string {
	if !d.Capabilities().FinishedIndex {
		return ""
	}
	return "status IN (" + strconv.Itoa(int(core.StatusDone)) + ", " + strconv.Itoa(int(core.StatusDead)) + ") AND "
}

// statusTerm is the condition "status = s", preceded for DONE by the
// condition of the partial index of finished rows where the schema has one
// ([Capabilities.FinishedIndex]; the RETRY and DEAD indexes' condition is
// "status = s" itself, and NEW rows are counted apart), so that a
// statement reading one status reads that index rather than the table.
func statusTerm(d Dialect, s core.Status) string {
	eq := "status = " + strconv.Itoa(int(s))
	if s == core.StatusDone {
		return finishedTerm(d) + eq
	}
	return eq
}

// pinsPending reports whether d's claim and poll may name the pending
// index: SQLite (single writer, a partial pending index, INDEXED BY).
func pinsPending(d Dialect) bool {
	c := d.Capabilities()
	return c.SingleWriter && c.PendingIndex && c.Returning
}

// pendingIndex is the name of table's partial index of pending rows
// (the schema's {{.Index "pending"}}).
func pendingIndex(table string) string { return table + "_pending_idx" }

// deadIndex is the name of table's partial index of DEAD rows in id order
// (the schema's {{.Index "dead"}}).
func deadIndex(table string) string { return table + "_dead_idx" }

// orderIndex is the name of table's unique index of ordered rows by key
// and position (the schema's {{.Index "order"}}).
func orderIndex(table string) string { return table + "_order_idx" }

// skipLocked is the locking clause of a claim's subquery: FOR UPDATE SKIP
// LOCKED where the database has both RETURNING and SKIP LOCKED, so
// concurrent claimers skip each other's rows instead of waiting for them.
func skipLocked(d Dialect) string {
	if c := d.Capabilities(); c.Returning && c.SkipLocked {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// inList returns prefix, n comma-separated placeholders and suffix, rebound
// for the dialect (for statements whose id list varies).
func inList(d Dialect, prefix string, n int, suffix string) string {
	var b strings.Builder
	b.Grow(len(prefix) + 3*n + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
	}
	b.WriteString(suffix)
	return sqlx.Rebind(d.BindType(), b.String())
}

// holdsKey is the condition of a row (columns prefixed with prefix) that
// holds the later events of its key: pending (NEW, RETRY), or DEAD under
// the block policy.
func holdsKey(prefix string) string {
	st := func(s core.Status) string { return strconv.Itoa(int(s)) }
	return "(" + prefix + "status IN (" + st(core.StatusNew) + ", " + st(core.StatusRetry) + ") OR (" +
		prefix + "status = " + st(core.StatusDead) + " AND " + prefix + "order_skip = 0))"
}
