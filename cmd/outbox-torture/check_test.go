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
		{"b2", b, 2, 1}, {"b1", b, 1, 2}, // the outbox swapped them: 2 mismatches (inserted in outbox order: SQLite's trigger refuses a position below one taken)
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

	r, err := check(ctx, f.db, true, true, false)
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

// The stream check (-relay) on a fabricated stream copy: an event never
// stored (stream_lost), one stored twice (stream_duplicates), messages of
// no committed event, one without Nats-Msg-Id among them
// (stream_phantom), and an event stored before its key's predecessor
// (stream_order_violations). Each is named by problems and explain.
func TestCheckStreamFabricated(t *testing.T) {
	ctx := context.Background()
	f, err := openFresh(ctx, &options{db: "sqlite", keys: 2}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.close(false); err != nil {
			t.Error(err)
		}
	})
	a, b := keyName(0), keyName(1)
	for _, e := range []struct {
		id, key string
		seq     int64
	}{{"a1", a, 1}, {"a2", a, 2}, {"a3", a, 3}, {"b1", b, 1}, {"b2", b, 2}} {
		mustExec(t, f, insertLedgerAt, e.id, 1, e.key, e.seq)
		mustExec(t, f, insertDelivery, e.id, 1, 1)
	}
	// The stream in sequence order: a3 is missing, a2 stored twice, b2
	// before b1, x9 and a message without an id belong to no event.
	for i, id := range []string{"a1", "a2", "a2", "b2", "b1", "x9", ""} {
		mustExec(t, f, insertStream, i+1, id)
	}

	r, err := check(ctx, f.db, true, true, true)
	if err != nil {
		t.Fatal(err)
	}
	r.keys, r.ordered, r.relay = 2, true, relayNATS
	if r.streamMessages != 7 || r.streamLost != 1 || r.streamDuplicates != 1 || r.streamPhantom != 2 || r.streamOrderViolations != 1 {
		t.Errorf("stream_messages=%d stream_lost=%d stream_duplicates=%d stream_phantom=%d stream_order_violations=%d, want 7 1 1 2 1",
			r.streamMessages, r.streamLost, r.streamDuplicates, r.streamPhantom, r.streamOrderViolations)
	}
	if r.lost != 0 {
		t.Errorf("lost=%d, want 0: every ledger event was delivered", r.lost)
	}
	line := r.line()
	for _, want := range []string{" stream_lost=1 stream_duplicates=1 stream_phantom=2 stream_order_violations=1 ", " relay=natsjs stream_messages=7 "} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %q", line, want)
		}
	}
	p := strings.Join(r.problems(), "\n")
	for _, want := range []string{"1 committed events never stored in the stream", "1 events stored more than once",
		"2 stream messages of no committed event", "1 events stored in the stream before the event before them"} {
		if !strings.Contains(p, want) {
			t.Errorf("problems lack %q:\n%s", want, p)
		}
	}
	var explained strings.Builder
	if err := r.explain(ctx, f.db, &explained); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"not in the stream a3: ", "stored twice a2: ", "stream sequences: [2 3]", "stream phantom x9: ", "stream phantom : "} {
		if !strings.Contains(explained.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, explained.String())
		}
	}

	// Without -relay the line has no stream fields and nothing fails on them.
	r.relay = ""
	if strings.Contains(r.line(), "stream_") || strings.Contains(strings.Join(r.problems(), "\n"), "stream") {
		t.Errorf("a run without -relay reports the stream: %s\n%v", r.line(), r.problems())
	}
}
