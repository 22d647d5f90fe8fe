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

	keys            int  // ordering keys (0: order not tracked)
	ordered         bool // published ordered: order violations fail the run
	procs           int  // children at once
	orderViolations int  // deliveries of a key's seq n+1 before the first successful delivery of its seq n
	seqMismatch     int  // ledger rows whose outbox order_key/order_seq is not the recorded key and commit position

	relay                 string // "natsjs" or "rabbitmq" when the children relayed to a stream or queue ("": the stream fields are unused)
	streamMessages        int    // messages in the stream
	streamLost            int    // ledger ids never stored in the stream
	streamDuplicates      int    // messages beyond the first per event id
	streamPhantom         int    // stream messages whose event id has no ledger row
	streamOrderViolations int    // (ordered) events stored before the event at the previous commit position of their key
}

// checkQuery is one count of the report.
type checkQuery struct {
	field func(*report) *int
	query string
}

// The checks, in SQL: all bookkeeping stays in the database. Status 1 is
// DONE, 3 is DEAD (core.Status).
var checkQueries = []checkQuery{
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

// orderViolationsQuery counts the deliveries (of any outcome) of an
// event at commit position n+1 of its key for which no successful
// delivery of the event at position n has a smaller delivery id, that is
// came before. Redeliveries of an event already delivered are fine (at
// least once); a predecessor that was never delivered successfully makes
// every delivery of its successor a violation. Positions are the
// publisher's (ledger seq), not the outbox's.
const orderViolationsQuery = `SELECT COUNT(*) FROM ` + deliveriesTable + ` d
	JOIN ` + ledgerTable + ` l ON l.event_id = d.event_id
	JOIN ` + ledgerTable + ` p ON p.order_key = l.order_key AND p.seq = l.seq - 1
	WHERE NOT EXISTS (SELECT 1 FROM ` + deliveriesTable + ` s WHERE s.event_id = p.event_id AND s.ok = 1 AND s.id < d.id)`

// seqMismatchQuery counts the committed events whose outbox row does not
// carry the key and commit position the publisher recorded: the outbox's
// positions must be the commit order.
const seqMismatchQuery = `SELECT COUNT(*) FROM ` + ledgerTable + ` l
	JOIN ` + outboxTable + ` o ON o.event_id = l.event_id
	WHERE o.order_key IS NULL OR o.order_seq IS NULL OR o.order_key <> l.order_key OR o.order_seq <> l.seq`

// The checks of the stream (-relay), on the copy of its messages in the
// stream table.
var streamQueries = []checkQuery{
	{func(r *report) *int { return &r.streamMessages }, `SELECT COUNT(*) FROM ` + streamTable},
	{func(r *report) *int { return &r.streamLost }, `SELECT COUNT(*) FROM ` + ledgerTable + ` l
		WHERE NOT EXISTS (SELECT 1 FROM ` + streamTable + ` s WHERE s.event_id = l.event_id)`},
	{func(r *report) *int { return &r.streamDuplicates }, `SELECT COUNT(*) - COUNT(DISTINCT event_id) FROM ` + streamTable},
	{func(r *report) *int { return &r.streamPhantom }, `SELECT COUNT(*) FROM ` + streamTable + ` s
		WHERE NOT EXISTS (SELECT 1 FROM ` + ledgerTable + ` l WHERE l.event_id = s.event_id)`},
}

// streamOrderQuery counts the events stored in the stream while the event
// at the previous commit position of their key was not stored before them
// (missing, or later in the stream).
const streamOrderQuery = `SELECT COUNT(*) FROM ` + ledgerTable + ` l
	JOIN ` + ledgerTable + ` p ON p.order_key = l.order_key AND p.seq = l.seq - 1
	JOIN ` + streamTable + ` sl ON sl.event_id = l.event_id
	WHERE NOT EXISTS (SELECT 1 FROM ` + streamTable + ` sp WHERE sp.event_id = p.event_id AND sp.stream_seq < sl.stream_seq)`

// check reads the report from the database; the order fields when the run
// tracked order (ordered: the outbox's positions too), the stream fields
// when the children relayed to a stream.
func check(ctx context.Context, db *sqlx.DB, tracked, ordered, relayed bool) (*report, error) {
	r := &report{}
	queries := checkQueries[:len(checkQueries):len(checkQueries)]
	if tracked {
		queries = append(queries, checkQuery{func(r *report) *int { return &r.orderViolations }, orderViolationsQuery})
	}
	if ordered {
		queries = append(queries, checkQuery{func(r *report) *int { return &r.seqMismatch }, seqMismatchQuery})
	}
	if relayed {
		queries = append(queries, streamQueries...)
		if ordered {
			queries = append(queries, checkQuery{func(r *report) *int { return &r.streamOrderViolations }, streamOrderQuery})
		}
	}
	for _, q := range queries {
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
	var order, run string
	if r.keys > 0 {
		order = fmt.Sprintf(" order_violations=%d", r.orderViolations)
		if r.ordered {
			order += fmt.Sprintf(" seq_mismatch=%d", r.seqMismatch)
		}
		run = fmt.Sprintf(" ordered=%t keys=%d", r.ordered, r.keys)
	}
	if r.procs > 1 {
		run += fmt.Sprintf(" procs=%d", r.procs)
	}
	var stream string
	if r.relay != "" {
		stream = fmt.Sprintf(" stream_lost=%d stream_duplicates=%d stream_phantom=%d", r.streamLost, r.streamDuplicates, r.streamPhantom)
		if r.ordered {
			stream += fmt.Sprintf(" stream_order_violations=%d", r.streamOrderViolations)
		}
		run += fmt.Sprintf(" relay=%s stream_messages=%d", r.relay, r.streamMessages)
	}
	return fmt.Sprintf("torture: db=%s cycles=%d events=%d lost=%d phantom=%d duplicates=%d%s%s"+
		" rolled_back=%d not_done=%d dead=%d orphans=%d listener_failures=%d%s seed=%d seconds=%.1f",
		r.db, r.cycles, r.events, r.lost, r.phantom, r.duplicates, stream, order,
		r.rolledBack, r.notDone, r.dead, r.orphans, r.failures, run, r.seed, r.elapsed.Seconds())
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
	if r.ordered {
		add(r.orderViolations, "order violations (deliveries of an event before the first successful delivery of the event before it in its key)")
		add(r.seqMismatch, "events whose outbox position in their key is not their commit position")
	}
	if r.relay != "" {
		add(r.streamLost, "committed events never stored in the stream (stream_lost)")
		if r.relay == relayNATS {
			// RabbitMQ has no server-side deduplication: a redelivery
			// (a lease taken over after a SIGKILL between the broker's
			// confirm and the DONE, a retry after a deliberate failure)
			// is stored again, at least once as documented.
			add(r.streamDuplicates, "events stored more than once in the stream despite Nats-Msg-Id (stream_duplicates)")
		}
		add(r.streamPhantom, "stream messages of no committed event (stream_phantom)")
		if r.ordered {
			add(r.streamOrderViolations, "events stored in the stream before the event before them in their key (stream_order_violations)")
		}
	}
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
		{r.streamLost, "not in the stream", `SELECT l.event_id FROM ` + ledgerTable + ` l WHERE NOT EXISTS
			(SELECT 1 FROM ` + streamTable + ` s WHERE s.event_id = l.event_id) ORDER BY l.event_id LIMIT 10`},
		{r.streamDuplicates, "stored twice", `SELECT event_id FROM ` + streamTable + ` GROUP BY event_id
			HAVING COUNT(*) > 1 ORDER BY event_id LIMIT 10`},
		{r.streamPhantom, "stream phantom", `SELECT DISTINCT s.event_id FROM ` + streamTable + ` s WHERE NOT EXISTS
			(SELECT 1 FROM ` + ledgerTable + ` l WHERE l.event_id = s.event_id) ORDER BY s.event_id LIMIT 10`},
	}
	if r.ordered && r.orderViolations > 0 {
		if err := explainOrder(ctx, db, w); err != nil {
			return err
		}
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
	var seqs []int64
	if err := db.SelectContext(ctx, &seqs, db.Rebind(`SELECT stream_seq FROM `+streamTable+` WHERE event_id = ? ORDER BY stream_seq`), id); err == nil && len(seqs) > 0 {
		fmt.Fprintf(&b, "; stream sequences: %v", seqs)
	}
	return b.String()
}

// explainOrder prints a few order violations: the late event's key and
// position, the delivery that came too early, and the deliveries of the
// event before it.
func explainOrder(ctx context.Context, db *sqlx.DB, w io.Writer) error {
	var rows []struct {
		Key      string `db:"order_key"`
		Seq      int64  `db:"seq"`
		Delivery int64  `db:"delivery"`
		Child    int    `db:"child"`
		EventID  string `db:"event_id"`
		PrevID   string `db:"prev_id"`
	}
	q := `SELECT l.order_key, l.seq, d.id AS delivery, d.child, l.event_id, p.event_id AS prev_id FROM ` + deliveriesTable + ` d
		JOIN ` + ledgerTable + ` l ON l.event_id = d.event_id
		JOIN ` + ledgerTable + ` p ON p.order_key = l.order_key AND p.seq = l.seq - 1
		WHERE NOT EXISTS (SELECT 1 FROM ` + deliveriesTable + ` s WHERE s.event_id = p.event_id AND s.ok = 1 AND s.id < d.id)
		ORDER BY d.id LIMIT 10`
	if err := db.SelectContext(ctx, &rows, q); err != nil {
		return err
	}
	for _, v := range rows {
		var prev []struct {
			ID    int64 `db:"id"`
			Child int   `db:"child"`
			OK    int   `db:"ok"`
		}
		if err := db.SelectContext(ctx, &prev, db.Rebind(`SELECT id, child, ok FROM `+deliveriesTable+` WHERE event_id = ? ORDER BY id`), v.PrevID); err != nil {
			return err
		}
		fmt.Fprintf(w, "  order violation: key %s seq %d (%s) delivered as delivery %d by child %d; deliveries of seq %d (%s) (id/child/ok): %v\n",
			v.Key, v.Seq, v.EventID, v.Delivery, v.Child, v.Seq-1, v.PrevID, prev)
	}
	return nil
}
