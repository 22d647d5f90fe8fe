package jdbcstore_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// The claim checks an ordered row's predecessor by reading the order
// index, one probe per row, also with pending ordered rows and DEAD rows
// in the table: written "order_key IS NULL OR NOT EXISTS (…)", it kept
// PostgreSQL from an anti-join, and its custom plans checked the
// predecessors against a hash of every pending and DEAD row (a scan of
// them per claim: ~200 ms on 1.5 M rows, 22,000 DEAD, against ~2 ms).
func TestClaimPlanProbesTheOrderIndexPostgres(t *testing.T) {
	st, _ := storeWithSchema(t, testdb.Postgres(t), pgdialect.Dialect)
	tbl := st.Table()
	// 60,000 rows over 90 days: DONE, 1 in 67 DEAD, the last 3,000
	// pending; 1 in 10 ordered, over 1,000 keys.
	seed := `INSERT INTO ` + tbl + ` (event_id, event_type, occurred_at, payload, status, attempts, available_at, created_at,
		done_at, order_key, order_seq, order_skip)
	SELECT 'e' || lpad(n::text, 8, '0'), 'T', c, '{}', 
		CASE WHEN n > 57000 THEN n % 2 * 2 WHEN n % 67 = 0 THEN 3 ELSE 1 END, 0, c, c,
		CASE WHEN n <= 57000 THEN c END,
		CASE WHEN n % 10 = 0 THEN 'k' || ((n/10 - 1) % 1000) END,
		CASE WHEN n % 10 = 0 THEN (n/10 - 1)/1000 + 1 END,
		CASE WHEN n % 10 = 0 AND n % 67 = 0 THEN 1 ELSE 0 END
	FROM (SELECT n, now() - interval '90 days' + n * interval '129600 milliseconds' AS c FROM generate_series(1, 60000) n) g`
	if _, err := st.DB().ExecContext(t.Context(), seed); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(t.Context(), "ANALYZE "+tbl); err != nil {
		t.Fatal(err)
	}
	d := st.Dialect()
	now := time.Now()
	at, lease := d.EncodeTime(now), d.EncodeTime(now.Add(time.Minute))
	claim := jdbcstore.StatementText(d, tbl)["claimReturning"]
	plan := explainRows(t, st.DB(), "EXPLAIN "+claim, []any{"owner", lease, at, at, at, "owner", 100}, func(_ []string, v []sql.RawBytes) string {
		return string(v[0])
	})
	if strings.Contains(plan, "hashed SubPlan") || !strings.Contains(plan, tbl+"_order_idx") {
		t.Errorf("the claim does not probe the order index per row:\n%s", plan)
	}
}
