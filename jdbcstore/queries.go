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
}

// timeColumns are the recordColumns holding instants.
var timeColumns = map[string]bool{"occurred_at": true, "available_at": true, "created_at": true, "done_at": true}

// selectList is the SELECT list of recordColumns for d: time columns go
// through the dialect's selectTime when it has one.
func selectList(d Dialect) string {
	ts, ok := d.(timeSelector)
	if !ok {
		return strings.Join(recordColumns, ", ")
	}
	exprs := make([]string, len(recordColumns))
	for i, c := range recordColumns {
		exprs[i] = c
		if timeColumns[c] {
			exprs[i] = ts.selectTime(c)
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
	// available_at, created_at.
	insert string
	// markDone: done_at, event_id.
	markDone string
	// markRetry: available_at, last_error, event_id.
	markRetry string
	// markDead: last_error, event_id.
	markDead string
	// poll: now (available_at bound), now-skipRecent (created_at bound), limit.
	poll string
	// get: event_id.
	get string
	// countByStatus: no arguments.
	countByStatus string
}

// buildStatements writes the statements with '?' placeholders, quotes the
// table with the dialect and rebinds the placeholders to its bind type.
// Status values come from core's constants; no value is ever formatted
// into the text.
func buildStatements(d Dialect, table string) statements {
	t := d.quoteIdent(table)
	cols := selectList(d)
	st := func(s core.Status) string { return strconv.Itoa(int(s)) }
	notDone := " WHERE event_id = ? AND status <> " + st(core.StatusDone)
	releaseLease := ", locked_by = NULL, locked_until = NULL"

	q := statements{
		insert: "INSERT INTO " + t + " (event_id, event_type, aggregate_type, aggregate_id, tenant_id," +
			" occurred_at, payload, payload_kind, headers, status, attempts, available_at, created_at)" +
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, " + st(core.StatusNew) + ", 0, ?, ?)",
		markDone: "UPDATE " + t + " SET status = " + st(core.StatusDone) + ", done_at = ?" +
			releaseLease + notDone,
		markRetry: "UPDATE " + t + " SET status = " + st(core.StatusRetry) +
			", attempts = attempts + 1, available_at = ?, last_error = ?" + releaseLease + notDone,
		markDead: "UPDATE " + t + " SET status = " + st(core.StatusDead) +
			", attempts = attempts + 1, last_error = ?" + releaseLease + notDone,
		poll: "SELECT " + cols + " FROM " + t +
			" WHERE status IN (" + st(core.StatusNew) + ", " + st(core.StatusRetry) + ")" +
			" AND available_at <= ? AND created_at <= ?" +
			" ORDER BY available_at, created_at, event_id LIMIT ?",
		get:           "SELECT " + cols + " FROM " + t + " WHERE event_id = ?",
		countByStatus: "SELECT status, COUNT(*) FROM " + t + " GROUP BY status",
	}
	bt := d.bindType()
	for _, p := range []*string{&q.insert, &q.markDone, &q.markRetry, &q.markDead, &q.poll, &q.get, &q.countByStatus} {
		*p = sqlx.Rebind(bt, *p)
	}
	return q
}
