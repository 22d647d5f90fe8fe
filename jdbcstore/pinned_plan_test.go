package jdbcstore_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// On a table SQLite has no statistics for (new, or never analyzed), the
// claim and the poll must still read the partial pending index in claim
// order: left to itself the planner reads "status IN (0, 2)" from the
// (status, done_at) index and sorts every pending row on each claim.
func TestSQLiteClaimPinsThePendingIndex(t *testing.T) {
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
	q := jdbcstore.StatementText(sqlite.Dialect, jdbcstore.DefaultTable)
	for _, name := range []string{"claimPinned", "pollPinned"} {
		stmt := q[name]
		args := make([]any, strings.Count(stmt, "?"))
		for i := range args {
			args[i] = 1
		}
		rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+stmt, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "USING INDEX "+jdbcstore.DefaultTable+"_pending_idx") || strings.Contains(text, "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("%s does not read the pending index in claim order:\n%s\n%s", name, stmt, text)
		}
	}
	// The store uses them: a claim on the applied schema works.
	if _, err := st.PollPending(t.Context(), time.Now(), 0, 10); err != nil {
		t.Fatal(err)
	}
}
