package sqlite_test

import (
	"database/sql"
	_ "embed"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// schemaBeforeFinished is the outbox schema of the release before the
// partial index of finished rows: a (status, done_at) index over every row.
//
//go:embed testdata/outbox_before_finished.sql
var schemaBeforeFinished string

// A table created by the release before gets the partial indexes of
// finished and RETRY rows in place of its (status, done_at) index over every
// row, keeps its rows, and the counts, the purge and the recent activity
// read the new indexes.
func TestApplySchemaReplacesStatusIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	const table = "outbox_event"
	old := strings.NewReplacer("{{.Table}}", `"`+table+`"`).Replace(schemaBeforeFinished)
	for _, name := range []string{"pending", "status_done", "dead", "order", "status_available"} {
		old = strings.ReplaceAll(old, `{{.Index "`+name+`"}}`, `"`+table+"_"+name+`_idx"`)
	}
	old = strings.ReplaceAll(old, `{{.Trigger "order_position"}}`, `"`+table+`_order_position_trg"`)
	// The driver runs every statement of a script.
	if _, err := db.ExecContext(ctx, old); err != nil {
		t.Fatalf("old schema: %v\n%s", err, old)
	}
	if got := indexes(t, db.DB, table); !slices.Contains(got, table+"_status_done_idx") {
		t.Fatalf("old schema's indexes = %v, want %s_status_done_idx", got, table)
	}

	// Rows written by the old release: one DONE 90 minutes ago, one NEW.
	now := time.Now()
	clock := now.Add(-90 * time.Minute)
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: sqlite.Dialect, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	done, fresh := mustEnv(t, core.NewEvent("Old").PayloadJSONString(`{}`)), mustEnv(t, core.NewEvent("Fresh").PayloadJSONString(`{}`))
	for _, env := range []core.Envelope{done, fresh} {
		if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := st.MarkDone(ctx, testOwner, []string{done.ID()}); err != nil || n != 1 {
		t.Fatalf("MarkDone = %d, %v", n, err)
	}
	clock = now

	if err := st.ApplySchema(ctx); err != nil {
		t.Fatalf("ApplySchema on the old table: %v", err)
	}
	got := indexes(t, db.DB, table)
	if slices.Contains(got, table+"_status_done_idx") || !slices.Contains(got, table+"_finished_idx") || !slices.Contains(got, table+"_retry_idx") {
		t.Fatalf("indexes after ApplySchema = %v, want %s_finished_idx, %[2]s_retry_idx and no %[2]s_status_done_idx", got, table)
	}
	counts, err := st.CountByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[core.StatusDone] != 1 || counts[core.StatusNew] != 1 {
		t.Fatalf("CountByStatus = %v, want 1 DONE and 1 NEW", counts)
	}
	act, err := st.Activity(ctx, 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if act[0].Done != 1 || act[1].Done != 0 {
		t.Fatalf("Activity = %+v, want the DONE row in the first hour", act)
	}
	res, err := st.Purge(ctx, jdbcstore.PurgeOptions{DoneOlderThan: time.Minute})
	if err != nil || res.Done != 1 {
		t.Fatalf("Purge = %+v, %v; want 1 DONE row removed", res, err)
	}
	if _, err := st.Get(ctx, fresh.ID()); err != nil {
		t.Fatalf("the NEW row after the purge: %v", err)
	}
	// ApplySchema stays idempotent.
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatalf("second ApplySchema: %v", err)
	}
}

// indexes lists the names of table's indexes.
func indexes(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
