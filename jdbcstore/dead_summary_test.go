package jdbcstore_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A page of summaries reads neither payloads (up to 1 MiB each) nor
// headers, through the same dead index as ListDead.
func TestDeadSummariesSelectNoPayloadOrHeaders(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, jdbcstore.Config{Dialect: sqlite.Dialect})
	if _, err := st.ListDeadSummaries(t.Context(), jdbcstore.DeadFilter{}, "", 10); err != nil {
		t.Fatal(err)
	}
	for _, f := range []jdbcstore.DeadFilter{{}, {EventType: "T", TenantID: "x"}, {IDs: []string{"a", "b"}}} {
		q, _ := jdbcstore.DeadSummaryQuery(st, f, "a", 10)
		cols := q[:strings.Index(q, " FROM ")]
		if regexp.MustCompile(`\b(payload|headers)\b`).MatchString(cols) || !strings.Contains(cols, "last_error") {
			t.Errorf("summary query selects %s", cols)
		}
		if !strings.Contains(q, `INDEXED BY "`+jdbcstore.DefaultTable+`_dead_idx"`) {
			t.Errorf("summary query does not name the dead index: %s", q)
		}
		if plan := sqlitePlan(t, st.DB(), q); !strings.Contains(plan, "_dead_idx") {
			t.Errorf("summary query plan: %s", plan)
		}
	}
}
