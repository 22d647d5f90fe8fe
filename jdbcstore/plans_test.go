package jdbcstore_test

import (
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/historyseed"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// planRows is how many finished rows the plan tests seed: enough for
// every planner to prefer an index over a scan where one serves.
// OUTBOX_TEST_PLAN_ROWS overrides it (5000000 shows the plans of the
// benchmark's history table).
func planRows(t *testing.T) int {
	n := 20_000
	if v := os.Getenv("OUTBOX_TEST_PLAN_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("OUTBOX_TEST_PLAN_ROWS=%q: want a positive number", v)
		}
	}
	return n
}

// planDB is how one database explains a statement.
type planDB struct {
	kind string
	db   *sqlx.DB
	st   *jdbcstore.Store
	// idx maps the index roles to the database's index names.
	idx map[string]string
	// explain returns the plan of query as text, one line per step.
	explain func(t *testing.T, query string, args ...any) string
	// fullScan reports a step of plan that reads the whole table.
	fullScan func(plan string) bool
}

// TestPlansUseIndexes seeds a table with finished rows (as a long-lived
// deployment has), runs ANALYZE and checks that the statements of the
// hot path, the poller, the purge and the operators' views are planned on
// the index meant for them rather than on a scan of the table, on every
// database. The plans are logged (go test -v -run TestPlansUseIndexes).
func TestPlansUseIndexes(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		st, _ := openTestStore(t, jdbcstore.Config{})
		tbl := st.Table()
		checkPlans(t, planDB{kind: historyseed.SQLite, db: st.DB(), st: st,
			idx: map[string]string{"pending": tbl + "_pending_idx", "status": tbl + "_finished_idx",
				"done": tbl + "_finished_idx", "dead": tbl + "_dead_idx", "order": tbl + "_order_idx", "pk": "sqlite_autoindex_" + tbl + "_1"},
			explain: func(t *testing.T, q string, args ...any) string {
				return explainRows(t, st.DB(), "EXPLAIN QUERY PLAN "+q, args, func(cols []string, v []sql.RawBytes) string {
					return string(v[len(v)-1])
				})
			},
			// "SCAN t" without USING: the table itself, row by row.
			fullScan: regexp.MustCompile(`(?m)^SCAN ` + tbl + `$`).MatchString,
		})
	})
	t.Run("MySQL", func(t *testing.T) {
		st, _ := storeWithSchema(t, testdb.MySQL(t), mysqldialect.Dialect)
		checkPlans(t, planDB{kind: historyseed.MySQL, db: st.DB(), st: st,
			idx: map[string]string{"pending": "idx_status_available", "status": "idx_status_available",
				"done": "idx_status_done", "dead": "idx_status_done", "order": "idx_order", "pk": "PRIMARY"},
			explain: func(t *testing.T, q string, args ...any) string {
				return explainRows(t, st.DB(), "EXPLAIN "+q, args, func(cols []string, v []sql.RawBytes) string {
					var b strings.Builder
					for i, c := range cols {
						if s := string(v[i]); s != "" && c != "id" {
							fmt.Fprintf(&b, "%s=%s ", c, s)
						}
					}
					return strings.TrimSpace(b.String())
				})
			},
			// type ALL: every row of the table, in no index's order.
			// Not a derived table's rows (table=<derived2>): those are the
			// subqueries' results.
			fullScan: regexp.MustCompile(`(?m)table=[^<\s][^\n]*\btype=ALL\b`).MatchString,
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		st, _ := storeWithSchema(t, testdb.Postgres(t), pgdialect.Dialect)
		tbl := st.Table()
		checkPlans(t, planDB{kind: historyseed.Postgres, db: st.DB(), st: st,
			idx: map[string]string{"pending": tbl + "_pending_idx", "status": tbl + "_status_done_idx",
				"done": tbl + "_status_done_idx", "dead": tbl + "_dead_idx", "order": tbl + "_order_idx", "pk": tbl + "_pkey"},
			explain: func(t *testing.T, q string, args ...any) string {
				return explainRows(t, st.DB(), "EXPLAIN "+q, args, func(_ []string, v []sql.RawBytes) string {
					return string(v[0])
				})
			},
			fullScan: regexp.MustCompile(`Seq Scan on ` + tbl + `\b`).MatchString,
		})
	})
}

// explainRows runs an EXPLAIN and renders each row with line.
func explainRows(t *testing.T, db *sqlx.DB, q string, args []any, line func(cols []string, v []sql.RawBytes) string) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		v := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(v))
		for i := range v {
			ptrs[i] = &v[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, line(cols, v))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return strings.Join(out, "\n")
}

// checkPlans seeds p's table and checks each statement's plan.
func checkPlans(t *testing.T, p planDB) {
	ctx := t.Context()
	n := planRows(t)
	now := time.Now()
	start := time.Now()
	if err := historyseed.Seed(ctx, p.db, p.kind, historyseed.Spec{
		Table: p.st.Table(), Done: n, Dead: max(1, n/50), End: now.Add(-time.Hour), Span: 120 * 24 * time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d DONE and %d DEAD rows in %v", n, max(1, n/50), time.Since(start).Round(time.Millisecond))
	seedBacklog(t, p, max(1, n/40))
	d := p.st.Dialect()
	q := jdbcstore.StatementText(d, p.st.Table())
	at := d.EncodeTime(now)
	old := d.EncodeTime(now.Add(-30 * 24 * time.Hour))
	lease := d.EncodeTime(now.Add(time.Minute))
	claim, claimArgs := q["claimReturning"], []any{"owner", lease, at, at, at, "owner", 100}
	if !d.Capabilities().Returning {
		claim, claimArgs = q["claimSelect"], claimArgs[2:]
	}
	positions := []any{"k1", 2, "k2", 5, "k3", 9}
	claimNext, claimNextArgs := q["claimNext3"], append(append([]any{"owner", lease}, positions...), at, at, at, "")
	if !d.Capabilities().Returning {
		claimNext, claimNextArgs = q["selectNext3"], claimNextArgs[2:]
	}
	listDead, listArgs := jdbcstore.ListDeadQuery(p.st, jdbcstore.DeadFilter{}, "", 100)
	// A first list settles the indexes the store names (checkPins).
	noDead := jdbcstore.DeadFilter{EventType: "TypeWithoutDeadRows"}
	if _, err := p.st.ListDead(ctx, noDead, "", 10); err != nil {
		t.Fatal(err)
	}
	listByType, listByTypeArgs := jdbcstore.ListDeadQuery(p.st, noDead, "", 100)
	listByTenant, listByTenantArgs := jdbcstore.ListDeadQuery(p.st, jdbcstore.DeadFilter{TenantID: "TenantWithoutDeadRows"}, "", 100)
	listByTime, listByTimeArgs := jdbcstore.ListDeadQuery(p.st, jdbcstore.DeadFilter{From: now.Add(-time.Minute)}, "", 100)
	counts, deadByType := q["countByStatus"], q["deadByType"]
	// The counts read each status's index range; with a partial index of
	// the finished rows the pending ones are counted on the pending index
	// (SQLite counts the whole table from its smallest index).
	// The purge's dry-run count reads most of this table on the others
	// (their planners may rightly scan it).
	countsIndex, purgeCountIndex := "", ""
	if d.Capabilities().FinishedIndex {
		countsIndex, purgeCountIndex = "pending", "done"
	}
	activity, activityArgs := jdbcstore.ActivityQuery(p.st, 3, time.Hour, now)
	if q["deadByTypePinned"] != "" {
		deadByType = q["deadByTypePinned"]
	}
	cases := []struct {
		name, query string
		args        []any
		index       string // the roles of the indexes the plan may use, "|"-separated ("" to log only)
	}{
		{"claim", claim, claimArgs, "pending"},
		{"poll", q["poll"], []any{at, at, 100}, "pending"},
		// With a pending backlog PostgreSQL may read these rows from the
		// status index as well.
		{"reap", q["reap"], jdbcstore.ReapArgs(d, at, 100), "pending|status"},
		{"release", q["release"], []any{"owner"}, "pending|status"},
		{"markDone", q["markDone3"], []any{at, "a", "b", "c", "owner"}, "pk"},
		// Either index finds the key's pending rows: the order index by
		// key, the pending one holding only pending rows.
		{"waiting", q["waiting1"], []any{"key", at}, "order|pending"},
		// The events after finished ones, by key and position: the order
		// index, or the pending one where it holds few rows (as here).
		{"claim next", claimNext, claimNextArgs, "order|pending"},
		// The positions of finished events of the hot path, by id, with an
		// event waiting behind them: by primary key, or from the order
		// index where it holds few rows (as here: no row is ordered).
		{"claim next: positions by id", q["positions3"], []any{"a", "b", "c", at}, "pk|order"},
		{"stats: oldest pending", q["oldestPending"], nil, "pending|status"},
		{"first due (the poller's lag probe)", q["firstDue"], nil, "pending"},
		{"stats: count by status", counts, nil, countsIndex},
		{"recent activity", activity, activityArgs, "done|dead"},
		{"stats: DEAD by type", deadByType, nil, "status|dead"},
		{"stats: blocked keys", q["countBlocked"], nil, ""},
		{"dead list", listDead, listArgs, "dead|pk"},
		// Not the primary key in id order: with no DEAD row of the type
		// that reads the whole table.
		{"dead list by type", listByType, listByTypeArgs, "dead"},
		// Nor for a tenant or a time range: the DEAD rows' range of an index.
		{"dead list by tenant", listByTenant, listByTenantArgs, "dead|status"},
		{"dead list by time", listByTime, listByTimeArgs, "dead|status"},
		{"purge: page", q["purgePage"], []any{1, d.EncodeTime(time.Unix(0, 0)), old, 500}, "done"},
		{"purge: count", q["purgeCount"], []any{1, old}, purgeCountIndex},
		{"purge: delete", q["purgeDelete3"], []any{"a", "b", "c", 1, old}, "pk"},
		{"purge: legacy DEAD page", q["purgeLegacyPage"], []any{old, "", 500}, ""},
	}
	if d.Capabilities().SingleWriter {
		// Single-writer databases (SQLite) read and delete a batch in one
		// statement: its subquery must read the done index.
		cases = append(cases, struct {
			name, query string
			args        []any
			index       string
		}{"purge: batch (single writer)", q["purgeBatch"], []any{1, old, 500}, "done"})
	}
	var report strings.Builder
	for _, c := range cases {
		plan := p.explain(t, c.query, c.args...)
		fmt.Fprintf(&report, "\n-- %s\n%s\n", c.name, plan)
		if c.index == "" {
			continue
		}
		var names []string
		for role := range strings.SplitSeq(c.index, "|") {
			names = append(names, p.idx[role])
		}
		if !slices.ContainsFunc(names, func(name string) bool { return strings.Contains(plan, name) }) {
			t.Errorf("%s: the plan uses none of %s:\n%s\n%s", c.name, strings.Join(names, ", "), c.query, plan)
		}
		if p.fullScan(plan) {
			t.Errorf("%s: the plan scans the table:\n%s\n%s", c.name, c.query, plan)
		}
	}
	t.Logf("plans with %d finished rows:%s", n, report.String())
}

// seedBacklog adds a pending backlog of 2n+1 rows to p's table: a key
// blocked by a DEAD event with n events waiting behind it, due first, then
// n unordered events; then it refreshes the planner statistics. The
// claims and the first-due read must read past the waiting rows on an
// index, not scan the table.
func seedBacklog(t *testing.T, p planDB, n int) {
	t.Helper()
	ctx := t.Context()
	tx, err := p.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	lease := core.Lease{Owner: "seed", Until: time.Now().Add(time.Hour)}
	for i := range n + 1 {
		env, err := core.NewEvent("Waiting").ID(fmt.Sprintf("blocked-%d", i)).OrderKey("blocked").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.st.InsertOrdered(ctx, tx, env, lease); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		env, err := core.NewEvent("Pending").ID(fmt.Sprintf("pending-%d", i)).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.st.Insert(ctx, tx, env, core.Lease{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.st.MarkDead(ctx, "seed", "blocked-0", "poison"); !ok || err != nil {
		t.Fatalf("MarkDead: %v %v", ok, err)
	}
	if err := historyseed.Analyze(ctx, p.db, p.kind, p.st.Dialect().QuoteIdent(p.st.Table())); err != nil {
		t.Fatal(err)
	}
}
