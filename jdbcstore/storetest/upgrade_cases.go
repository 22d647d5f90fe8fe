package storetest

import (
	"bytes"
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
	tmpl, err := template.New("legacy").Option("missingkey=error").Parse(s.h.LegacyOutboxSchema)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, legacyNames{d: s.h.Dialect, table: table}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range splitDDL(buf.String()) {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("legacy schema: %v\n%s", err, stmt)
		}
	}
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
