package jdbcstore_test

import (
	"strings"
	"testing"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
)

// MySQL/MariaDB: a dead-letter list filtered by type names
// idx_status_done once the store found it holding event_type, and not on
// a table created by an earlier release, whose idx_status_done lacks it
// (naming it there would read one row per DEAD event).
func TestMySQLDeadTypeHintOnlyWithTheIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	byType := jdbcstore.DeadFilter{EventType: "T"}
	for _, old := range []bool{false, true} {
		db := testdb.MySQL(t)
		first, err := jdbcstore.New(db, jdbcstore.Config{Dialect: mysqldialect.Dialect})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.ApplySchema(ctx); err != nil {
			t.Fatal(err)
		}
		if old {
			if _, err := db.ExecContext(ctx, "ALTER TABLE "+first.Table()+" DROP KEY idx_status_done, ADD KEY idx_status_done (status, done_at)"); err != nil {
				t.Fatal(err)
			}
		}
		st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: mysqldialect.Dialect})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ListDead(ctx, byType, "", 10); err != nil {
			t.Fatalf("old index %v: %v", old, err)
		}
		q, _ := jdbcstore.ListDeadQuery(st, byType, "", 10)
		if hinted := strings.Contains(q, "USE INDEX (idx_status_done)"); hinted == old {
			t.Errorf("old index %v: hinted %v: %s", old, hinted, q)
		}
		if q, _ := jdbcstore.ListDeadQuery(st, jdbcstore.DeadFilter{}, "", 10); strings.Contains(q, "USE INDEX") {
			t.Errorf("an unfiltered list is hinted: %s", q)
		}
	}
}
