package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/outbox-go/outbox/core"
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
