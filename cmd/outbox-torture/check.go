package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// report is what the database says after the run.
type report struct {
	db      string
	cycles  int
	seed    int64
	elapsed time.Duration

	events     int // ledger rows: committed business transactions
	lost       int // ledger ids never delivered successfully
	phantom    int // delivered ids without ledger or outbox row, rolled-back ids that left a row
	duplicates int // successful deliveries beyond the first per id
	rolledBack int // transactions rolled back on purpose (as recorded)
	notDone    int // ledger ids whose outbox row is missing or not DONE
	dead       int // outbox rows DEAD
	orphans    int // outbox rows without a ledger row
	failures   int // listener invocations failed on purpose
}

// The checks, in SQL: all bookkeeping stays in the database. Status 1 is
// DONE, 3 is DEAD (core.Status).
var checkQueries = []struct {
	field func(*report) *int
	query string
}{
	{func(r *report) *int { return &r.events }, `SELECT COUNT(*) FROM ` + ledgerTable},
	{func(r *report) *int { return &r.lost }, `SELECT COUNT(*) FROM ` + ledgerTable + ` l
		WHERE NOT EXISTS (SELECT 1 FROM ` + deliveriesTable + ` d WHERE d.event_id = l.event_id AND d.ok = 1)`},
	{func(r *report) *int { return &r.phantom }, `SELECT COUNT(*) FROM (
		SELECT d.event_id FROM ` + deliveriesTable + ` d
		WHERE NOT EXISTS (SELECT 1 FROM ` + ledgerTable + ` l WHERE l.event_id = d.event_id)
		   OR NOT EXISTS (SELECT 1 FROM ` + outboxTable + ` o WHERE o.event_id = d.event_id)
		UNION
		SELECT r.event_id FROM ` + rollbacksTable + ` r
		WHERE EXISTS (SELECT 1 FROM ` + ledgerTable + ` l WHERE l.event_id = r.event_id)
		   OR EXISTS (SELECT 1 FROM ` + outboxTable + ` o WHERE o.event_id = r.event_id)
		   OR EXISTS (SELECT 1 FROM ` + deliveriesTable + ` d WHERE d.event_id = r.event_id)
	) p`},
	{func(r *report) *int { return &r.duplicates }, `SELECT COUNT(*) - COUNT(DISTINCT event_id) FROM ` + deliveriesTable + ` WHERE ok = 1`},
	{func(r *report) *int { return &r.rolledBack }, `SELECT COUNT(*) FROM ` + rollbacksTable},
	{func(r *report) *int { return &r.notDone }, `SELECT COUNT(*) FROM ` + ledgerTable + ` l
		WHERE NOT EXISTS (SELECT 1 FROM ` + outboxTable + ` o WHERE o.event_id = l.event_id AND o.status = 1)`},
	{func(r *report) *int { return &r.dead }, `SELECT COUNT(*) FROM ` + outboxTable + ` WHERE status = 3`},
	{func(r *report) *int { return &r.orphans }, `SELECT COUNT(*) FROM ` + outboxTable + ` o
		WHERE NOT EXISTS (SELECT 1 FROM ` + ledgerTable + ` l WHERE l.event_id = o.event_id)`},
	{func(r *report) *int { return &r.failures }, `SELECT COUNT(*) FROM ` + deliveriesTable + ` WHERE ok = 0`},
}

// check reads the report from the database.
func check(ctx context.Context, db *sqlx.DB) (*report, error) {
	r := &report{}
	for _, q := range checkQueries {
		var n sql.NullInt64 // COUNT(*) - COUNT(DISTINCT) of no rows is 0, but be safe
		if err := db.GetContext(ctx, &n, q.query); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(strings.Fields(q.query), " "), err)
		}
		*q.field(r) = int(n.Int64)
	}
	return r, nil
}

// line is the summary line: the required fields first, then the others.
func (r *report) line() string {
	return fmt.Sprintf("torture: db=%s cycles=%d events=%d lost=%d phantom=%d duplicates=%d"+
		" rolled_back=%d not_done=%d dead=%d orphans=%d listener_failures=%d seed=%d seconds=%.1f",
		r.db, r.cycles, r.events, r.lost, r.phantom, r.duplicates,
		r.rolledBack, r.notDone, r.dead, r.orphans, r.failures, r.seed, r.elapsed.Seconds())
}

// problems lists the failed checks.
func (r *report) problems() []string {
	var p []string
	add := func(n int, what string) {
		if n > 0 {
			p = append(p, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.lost, "committed events never delivered (lost)")
	add(r.phantom, "phantom events (delivered without a committed ledger row and outbox row, or rows left by a rolled-back transaction)")
	add(r.notDone, "committed events not DONE")
	add(r.dead, "events DEAD")
	add(r.orphans, "outbox rows without a ledger row (the event committed without its business row)")
	if r.events == 0 {
		p = append(p, "no event was committed: the children did not publish")
	}
	return p
}

// explain prints a few examples of each failure, with their outbox rows
// and deliveries, to start the investigation.
func (r *report) explain(ctx context.Context, db *sqlx.DB, w io.Writer) error {
	examples := []struct {
		n     int
		what  string
		query string
	}{
		{r.lost, "lost", `SELECT l.event_id FROM ` + ledgerTable + ` l WHERE NOT EXISTS
			(SELECT 1 FROM ` + deliveriesTable + ` d WHERE d.event_id = l.event_id AND d.ok = 1) ORDER BY l.event_id LIMIT 10`},
		{r.phantom, "phantom", `SELECT DISTINCT d.event_id FROM ` + deliveriesTable + ` d WHERE
			NOT EXISTS (SELECT 1 FROM ` + ledgerTable + ` l WHERE l.event_id = d.event_id) OR
			NOT EXISTS (SELECT 1 FROM ` + outboxTable + ` o WHERE o.event_id = d.event_id) ORDER BY d.event_id LIMIT 10`},
		{r.notDone, "not DONE", `SELECT l.event_id FROM ` + ledgerTable + ` l WHERE NOT EXISTS
			(SELECT 1 FROM ` + outboxTable + ` o WHERE o.event_id = l.event_id AND o.status = 1) ORDER BY l.event_id LIMIT 10`},
		{r.orphans, "orphan", `SELECT o.event_id FROM ` + outboxTable + ` o WHERE NOT EXISTS
			(SELECT 1 FROM ` + ledgerTable + ` l WHERE l.event_id = o.event_id) ORDER BY o.event_id LIMIT 10`},
	}
	for _, ex := range examples {
		if ex.n == 0 {
			continue
		}
		var ids []string
		if err := db.SelectContext(ctx, &ids, ex.query); err != nil {
			return err
		}
		for _, id := range ids {
			fmt.Fprintf(w, "  %s %s: %s\n", ex.what, id, describe(ctx, db, id))
		}
	}
	return nil
}

// describe returns what the database holds about one event id.
func describe(ctx context.Context, db *sqlx.DB, id string) string {
	var b strings.Builder
	var ledgerChild sql.NullInt64
	_ = db.GetContext(ctx, &ledgerChild, db.Rebind(`SELECT MAX(child) FROM `+ledgerTable+` WHERE event_id = ?`), id)
	if ledgerChild.Valid {
		fmt.Fprintf(&b, "ledger child %d; ", ledgerChild.Int64)
	} else {
		b.WriteString("no ledger row; ")
	}
	var row struct {
		Status      int            `db:"status"`
		Attempts    int            `db:"attempts"`
		LockedBy    sql.NullString `db:"locked_by"`
		LastError   sql.NullString `db:"last_error"`
		AggregateID sql.NullString `db:"aggregate_id"`
	}
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT status, attempts, locked_by, last_error, aggregate_id FROM `+outboxTable+` WHERE event_id = ?`), id)
	switch {
	case err == sql.ErrNoRows:
		b.WriteString("no outbox row; ")
	case err != nil:
		fmt.Fprintf(&b, "outbox row unreadable (%v); ", err)
	default:
		fmt.Fprintf(&b, "outbox status=%d attempts=%d publisher child=%s locked_by=%q last_error=%q; ",
			row.Status, row.Attempts, row.AggregateID.String, row.LockedBy.String, row.LastError.String)
	}
	var deliveries []struct {
		Child int `db:"child"`
		OK    int `db:"ok"`
	}
	_ = db.SelectContext(ctx, &deliveries, db.Rebind(`SELECT child, ok FROM `+deliveriesTable+` WHERE event_id = ?`), id)
	fmt.Fprintf(&b, "deliveries (child/ok): %v", deliveries)
	return b.String()
}
