package jdbcstore_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// sqlitePlan returns SQLite's query plan of stmt, one step per line, with
// every placeholder bound to 1.
func sqlitePlan(t *testing.T, db *sqlx.DB, stmt string) string {
	t.Helper()
	args := make([]any, strings.Count(stmt, "?"))
	for i := range args {
		args[i] = 1
	}
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+stmt, args...)
	if err != nil {
		t.Fatalf("%s: %v", stmt, err)
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
	return strings.Join(plan, "\n")
}

// On a table SQLite has no statistics for (new, or never analyzed), the
// claim and the poll must still read the partial pending index in claim
// order: left to itself the planner reads "status IN (0, 2)" from the
// (status, done_at) index and sorts every pending row on each claim.
func TestSQLiteClaimPinsThePendingIndex(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, jdbcstore.Config{Dialect: sqlite.Dialect})
	db := st.DB()
	q := jdbcstore.StatementText(sqlite.Dialect, jdbcstore.DefaultTable)
	for _, name := range []string{"claimPinned", "pollPinned"} {
		stmt := q[name]
		text := sqlitePlan(t, db, stmt)
		if !strings.Contains(text, "USING INDEX "+jdbcstore.DefaultTable+"_pending_idx") || strings.Contains(text, "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("%s does not read the pending index in claim order:\n%s\n%s", name, stmt, text)
		}
	}
	// The store uses them: a claim on the applied schema works.
	if _, err := st.PollPending(t.Context(), time.Now(), 0, 10); err != nil {
		t.Fatal(err)
	}
}

// Without statistics SQLite reads more than a few positions' rows from
// the status index ("status IN (0, 2)": every pending row) rather than
// look each up: ClaimNext names the order index.
func TestSQLiteClaimNextPinsTheOrderIndex(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, jdbcstore.Config{Dialect: sqlite.Dialect})
	stmt := jdbcstore.StatementText(sqlite.Dialect, jdbcstore.DefaultTable)["claimNextPinned60"]
	text := sqlitePlan(t, st.DB(), stmt)
	if !strings.Contains(text, "USING INDEX "+jdbcstore.DefaultTable+"_order_idx (order_key=? AND order_seq=?)") ||
		strings.Contains(text, "status_done_idx") {
		t.Errorf("ClaimNext does not look the positions up on the order index:\n%s\n%s", stmt, text)
	}
}

// A store that did not apply the schema (outboxctl, the dashboard) names
// the indexes too once its first use found them, and names none on a
// table that lacks them, where naming one would fail the query.
func TestSQLitePinsFoundWithoutApplySchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()

	// The schema applied by another store.
	first, _ := openTestStore(t, jdbcstore.Config{Dialect: sqlite.Dialect})
	st, err := jdbcstore.New(first.DB(), jdbcstore.Config{Dialect: sqlite.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := jdbcstore.ListDeadQuery(st, jdbcstore.DeadFilter{}, "", 10); strings.Contains(q, "INDEXED BY") {
		t.Fatalf("a store names the dead index before it looked for it: %s", q)
	}
	if _, err := st.ListDead(ctx, jdbcstore.DeadFilter{}, "", 10); err != nil {
		t.Fatal(err)
	}
	if q, _ := jdbcstore.ListDeadQuery(st, jdbcstore.DeadFilter{}, "", 10); !strings.Contains(q, "INDEXED BY \""+jdbcstore.DefaultTable+"_dead_idx\"") {
		t.Errorf("after a first list the store does not name the dead index: %s", q)
	}

	// A table without the indexes (created by hand from the table
	// statement alone): every read still works.
	bare, err := sqlite.Open(filepath.Join(dir, "bare.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Close() })
	st2, err := jdbcstore.New(bare, jdbcstore.Config{Dialect: sqlite.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	schema := st2.SchemaSQL()
	start := strings.Index(schema, "CREATE TABLE")
	end := start + strings.Index(schema[start:], ");") + 1
	table := schema[start:end]
	if _, err := bare.ExecContext(ctx, table); err != nil {
		t.Fatalf("%s: %v", table, err)
	}
	if _, err := st2.ListDead(ctx, jdbcstore.DeadFilter{}, "", 10); err != nil {
		t.Fatalf("list dead without the dead index: %v", err)
	}
	if _, err := st2.PollPending(ctx, time.Now(), 0, 10); err != nil {
		t.Fatalf("poll without the pending index: %v", err)
	}
	if q, _ := jdbcstore.ListDeadQuery(st2, jdbcstore.DeadFilter{}, "", 10); strings.Contains(q, "INDEXED BY") {
		t.Errorf("names a dead index the table lacks: %s", q)
	}
}
