package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
)

// legacyNames renders a legacy schema template: Table and Index as in
// jdbcstore.SchemaData, quoted with the dialect.
type legacyNames struct {
	d     jdbcstore.Dialect
	table string
}

func (n legacyNames) Table() string { return n.d.QuoteIdent(n.table) }
func (n legacyNames) Index(suffix string) string {
	return n.d.QuoteIdent(n.table + "_" + suffix + "_idx")
}

// A table created by an earlier release is upgraded by ApplySchema: its
// rows stay, and ordered events work on it afterwards. A second
// ApplySchema changes nothing.
func (s *suite) testUpgrade(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	base := s.newStore(t, clk, jdbcstore.Config{})
	db := base.DB()
	const table = "outbox_legacy"
	s.legacyTable(t, base, table)
	st, err := jdbcstore.New(db, jdbcstore.Config{Table: table, Dialect: s.h.Dialect, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := st.ApplySchema(t.Context()); err != nil {
			t.Fatalf("ApplySchema #%d on a legacy table: %v", i+1, err)
		}
	}
	insertLeased(t, st, jsonEvent(t, "legacy-unordered"), core.Lease{})
	publishOrdered(t, st, orderedEvent(t, "legacy-o1", "k", core.BlockOnDead), core.Lease{}, false)
	publishOrdered(t, st, orderedEvent(t, "legacy-o2", "k", core.BlockOnDead), core.Lease{}, false)
	claimedIDs(t, "claim on the upgraded table", claimAll(t, st, "node-a", t0.Add(time.Minute)), "legacy-o1", "legacy-unordered")
	if r := get(t, st, "legacy-o2"); r.OrderSeq != 2 || r.OrderKey != "k" {
		t.Errorf("legacy-o2: key %q seq %d, want k 2", r.OrderKey, r.OrderSeq)
	}
	if !strings.Contains(st.SchemaSQL(), "order_key") {
		t.Error("SchemaSQL lacks the ordering columns")
	}
}

// legacyTable creates table with the harness's legacy schema on st's
// database.
func (s *suite) legacyTable(t *testing.T, st *jdbcstore.Store, table string) {
	t.Helper()
	tmpl, err := template.New("legacy").Option("missingkey=error").Parse(s.h.LegacyOutboxSchema)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, legacyNames{d: s.h.Dialect, table: table}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range splitDDL(buf.String()) {
		if _, err := st.DB().ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("legacy schema: %v\n%s", err, stmt)
		}
	}
}

// applyAtOnce builds n stores of table on base's database and applies
// their schema at the same time, as nodes starting together do: every
// one must succeed.
func applyAtOnce(t *testing.T, base *jdbcstore.Store, d jdbcstore.Dialect, table string, n int) {
	t.Helper()
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		st, err := jdbcstore.New(base.DB(), jdbcstore.Config{Table: table, Dialect: d})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			<-start
			errs <- st.ApplySchema(t.Context())
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("ApplySchema of %s by one of %d nodes at once: %v", table, n, err)
		}
	}
}

// Nodes that start at once apply the schema at once: on a new table, and
// on a table of an earlier release, which they upgrade together; none
// fails (PostgreSQL's CREATE … IF NOT EXISTS raced in its catalogs).
func (s *suite) testConcurrentSchema(t *testing.T) {
	t.Parallel()
	base := s.newStore(t, nil, jdbcstore.Config{})
	d := s.h.Dialect
	for round := range 3 {
		applyAtOnce(t, base, d, fmt.Sprintf("outbox_at_once_%d", round), 4)
	}
	if s.h.LegacyOutboxSchema == "" {
		return
	}
	for round := range 3 {
		table := fmt.Sprintf("outbox_legacy_at_once_%d", round)
		s.legacyTable(t, base, table)
		applyAtOnce(t, base, d, table, 4)
		st, err := jdbcstore.New(base.DB(), jdbcstore.Config{Table: table, Dialect: d})
		if err != nil {
			t.Fatal(err)
		}
		publishOrdered(t, st, orderedEvent(t, "o1", "k", core.BlockOnDead), core.Lease{}, false)
	}
}

// An upgrade that meets a transaction open on its table, which holds a
// lock its ALTER needs, tries again every few seconds with a WARN, and the
// table's other statements go on meanwhile: a waiting ALTER queues them
// all behind it, on every node, and MariaDB's lock_wait_timeout is a day
// (an audit saw every node stop publishing for as long as a business
// transaction stayed open). Once the transaction ends, the upgrade goes
// through.
func (s *suite) testUpgradeBehindOpenTransaction(t *testing.T) {
	if _, ok := s.h.Dialect.(jdbcstore.DDLLockTimeouter); !ok {
		t.Skip("the dialect's schema changes do not queue behind open transactions")
	}
	t.Parallel()
	base := s.newStore(t, nil, jdbcstore.Config{})
	db := base.DB()
	const table = "outbox_legacy_open_tx"
	s.legacyTable(t, base, table)
	count := "SELECT COUNT(*) FROM " + s.h.Dialect.QuoteIdent(table)
	open, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback() //nolint:errcheck // committed below
	var n int
	if err := open.GetContext(t.Context(), &n, count); err != nil {
		t.Fatal(err)
	}
	logger, logs := testsupport.NewLogger()
	st, err := jdbcstore.New(db, jdbcstore.Config{Table: table, Dialect: s.h.Dialect, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan error, 1)
	go func() { applied <- st.ApplySchema(t.Context()) }()
	testsupport.WaitFor(t, 30*time.Second, "the WARN of the upgrade waiting for the open transaction", func() bool {
		return logs.Count("level=WARN", "schema change waits") > 0
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		if err := db.GetContext(ctx, &n, count); err != nil {
			t.Fatalf("read #%d of the table while the upgrade waits: %v", i+1, err)
		}
	}
	select {
	case err := <-applied:
		t.Fatalf("ApplySchema returned while a transaction held the table: %v", err)
	default:
	}
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatalf("ApplySchema once the transaction ended: %v", err)
	}
	if logs.Count("level=INFO", "schema change went through") == 0 {
		t.Errorf("no INFO line once the upgrade went through:\n%s", logs)
	}
	publishOrdered(t, st, orderedEvent(t, "o1", "k", core.BlockOnDead), core.Lease{}, false)
}

// A table an earlier upgrade left half done (a process stopped between
// two of its statements) is completed by the next ApplySchema.
func (s *suite) testHalfUpgraded(t *testing.T) {
	u, ok := s.h.Dialect.(jdbcstore.SchemaUpgrader)
	if !ok {
		t.Skip("the dialect has no upgrade")
	}
	t.Parallel()
	base := s.newStore(t, nil, jdbcstore.Config{})
	const table = "outbox_half_upgraded"
	s.legacyTable(t, base, table)
	tmpl, err := template.New("upgrade").Option("missingkey=error").Parse(u.OutboxUpgrade())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, legacyNames{d: s.h.Dialect, table: table}); err != nil {
		t.Fatal(err)
	}
	stmts := splitDDL(buf.String())
	if len(stmts) < 2 {
		t.Skip("the dialect's upgrade is one statement: it cannot stop half way")
	}
	if _, err := base.DB().ExecContext(t.Context(), stmts[0]); err != nil {
		t.Fatalf("first upgrade statement: %v", err)
	}
	st, err := jdbcstore.New(base.DB(), jdbcstore.Config{Table: table, Dialect: s.h.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := st.ApplySchema(t.Context()); err != nil {
			t.Fatalf("ApplySchema #%d on a half-upgraded table: %v", i+1, err)
		}
	}
	publishOrdered(t, st, orderedEvent(t, "o1", "k", core.BlockOnDead), core.Lease{}, false)
}

// splitDDL cuts a script into statements ending with ';' at the end of a
// line; lines holding only a "--" comment are dropped (the form of the
// dialects' schema templates).
func splitDDL(script string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	return out
}
