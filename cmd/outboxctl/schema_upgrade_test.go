package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A table created by an earlier release (no ordering columns): the
// commands reading it name 'schema apply' as the fix, and schema apply
// upgrades it in place and says so (its help and output said it left an
// existing table as it was).
func TestSchemaApplyUpgradesAnOldTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE outbox_event (
		event_id TEXT NOT NULL PRIMARY KEY, event_type TEXT NOT NULL, aggregate_type TEXT, aggregate_id TEXT,
		tenant_id TEXT, occurred_at INTEGER NOT NULL, payload BLOB NOT NULL, payload_kind INTEGER NOT NULL DEFAULT 0,
		headers TEXT, status INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, available_at INTEGER NOT NULL,
		created_at INTEGER NOT NULL, done_at INTEGER, last_error TEXT, locked_by TEXT, locked_until INTEGER)`); err != nil {
		t.Fatal(err)
	}
	line := fails(t, exitFailed, "--dsn", path, "stats")
	if !strings.Contains(line, "earlier release") || !strings.Contains(line, "schema apply") {
		t.Errorf("stats on an old table gives no hint: %q", line)
	}
	// serve refuses to start on it, with the same hint, rather than serve
	// pages that all fail.
	if line := fails(t, exitFailed, "--dsn", path, "serve", "--addr", "127.0.0.1:0"); !strings.Contains(line, "earlier release") || !strings.Contains(line, "schema apply") {
		t.Errorf("serve on an old table gives no hint: %q", line)
	}
	matches(t, ok(t, "--dsn", path, "schema", "apply"), `^schema applied: table outbox_event on sqlite .*upgraded if of an earlier release\)$`)
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM pragma_table_info('outbox_event') WHERE name IN ('order_key', 'order_seq', 'order_skip')`); err != nil || n != 3 {
		t.Fatalf("ordering columns after schema apply: %d, %v", n, err)
	}
	ok(t, "--dsn", path, "stats")
	if help := ok(t, "schema", "apply", "--help"); strings.Contains(help, "no migration") || !strings.Contains(help, "upgraded in place") {
		t.Errorf("schema apply --help:\n%s", help)
	}
}
