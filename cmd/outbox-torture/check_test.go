package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// The order check on a fabricated ledger: redeliveries of delivered events
// pass, a delivery before the predecessor's first success counts (also
// when the predecessor's earlier attempts failed, or when it was never
// delivered), and outbox positions that differ from the commit positions
// count as seq_mismatch.
func TestCheckOrderFabricated(t *testing.T) {
	ctx := context.Background()
	f, err := openFresh(ctx, &options{db: "sqlite", keys: 3}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.close(false); err != nil {
			t.Error(err)
		}
	})
	a, b, c := keyName(0), keyName(1), keyName(2)
	events := []struct {
		id, key   string
		seq       int64
		outboxSeq int64 // the outbox's order_seq
	}{
		{"a1", a, 1, 1}, {"a2", a, 2, 2}, {"a3", a, 3, 3},
		{"b1", b, 1, 2}, {"b2", b, 2, 1}, // the outbox swapped them: 2 mismatches
		{"c1", c, 1, 1}, {"c2", c, 2, 2},
	}
	for _, e := range events {
		mustExec(t, f, insertLedgerAt, e.id, 1, e.key, e.seq)
		mustExec(t, f, `INSERT INTO `+outboxTable+` (event_id, event_type, occurred_at, payload, status,
			available_at, created_at, order_key, order_seq) VALUES (?, ?, 0, '{}', 1, 0, 0, ?, ?)`,
			e.id, eventType, e.key, e.outboxSeq)
	}
	// Deliveries in the order they happened (ids ascending): event, ok.
	deliveries := []struct {
		id string
		ok int
	}{
		{"a1", 0}, {"a1", 1}, {"a2", 1}, {"a1", 1}, {"a3", 1}, {"a2", 1}, // in order, with redeliveries
		{"b2", 0}, // violation: b1 not delivered yet
		{"b1", 0},
		{"b2", 1}, // violation: b1 only failed so far
		{"b1", 1},
		{"b2", 1}, // fine now
		{"c2", 1}, // violation: c1 is never delivered
	}
	for _, d := range deliveries {
		mustExec(t, f, insertDelivery, d.id, 1, d.ok)
	}

	r, err := check(ctx, f.db, true, true)
	if err != nil {
		t.Fatal(err)
	}
	r.keys, r.ordered = 3, true
	if r.orderViolations != 3 || r.seqMismatch != 2 || r.lost != 1 {
		t.Errorf("order_violations=%d seq_mismatch=%d lost=%d, want 3, 2 and 1", r.orderViolations, r.seqMismatch, r.lost)
	}
	line := r.line()
	for _, want := range []string{" order_violations=3 ", " seq_mismatch=2 ", " ordered=true keys=3 "} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %q", line, want)
		}
	}
	if p := strings.Join(r.problems(), "\n"); !strings.Contains(p, "3 order violations") || !strings.Contains(p, "2 events whose outbox position") {
		t.Errorf("problems do not name the order violations and mismatches:\n%s", p)
	}
	var explained strings.Builder
	if err := r.explain(ctx, f.db, &explained); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(explained.String(), "order violation: "); n != 3 {
		t.Errorf("explain shows %d order violations, want 3:\n%s", n, explained.String())
	}

	// Without -ordered the violations are reported, not failed on.
	r.ordered = false
	for _, p := range r.problems() {
		if strings.Contains(p, "order") {
			t.Errorf("an unordered run fails on %q", p)
		}
	}
}

func mustExec(t *testing.T, f *freshDB, query string, args ...any) {
	t.Helper()
	if _, err := f.db.Exec(f.db.Rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
