package jdbcstore_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A claim reads NEW and RETRY rows apart, each along the status index in
// claim order: a claim of the first rows of a large backlog must not sort
// the whole backlog (as "status IN (0, 2) ORDER BY …" did, a temp B-tree
// over every pending row on every claim).
func TestSQLiteClaimFollowsTheStatusIndex(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: sqlite.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	q := jdbcstore.StatementText(sqlite.Dialect, jdbcstore.DefaultTable)["claimReturning"]
	args := make([]any, strings.Count(q, "?"))
	for i := range args {
		args[i] = 1
	}
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	index := "USING INDEX " + jdbcstore.DefaultTable + "_status_available_idx (status=? AND available_at<?)"
	if n := strings.Count(text, index); n != 2 {
		t.Errorf("%d searches %q, want 2 (NEW, RETRY):\n%s", n, index, text)
	}
	// Each head sorts only the ties of its index order (event_id: "FOR
	// RIGHT PART" or "FOR LAST TERM OF ORDER BY", by SQLite version) and
	// stops at its limit; the one full sort is that of the two heads'
	// rows.
	full := 0
	for _, line := range plan {
		if strings.TrimSpace(line) == "USE TEMP B-TREE FOR ORDER BY" {
			full++
		}
	}
	if full != 1 {
		t.Errorf("%d full sorts, want 1 (the heads' union):\n%s", full, text)
	}
}
