package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// fewParams is SQLite's dialect on connections that take only 20
// placeholders per statement (sqlite3_limit), as a third-party dialect's
// database might.
type fewParams struct{ jdbcstore.Dialect }

const fewParamsDriver = "outbox_test_sqlite_20_params"

func init() {
	sql.Register(fewParamsDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		c.SetLimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 20)
		return nil
	}})
}

func (d fewParams) Capabilities() jdbcstore.Capabilities {
	c := d.Dialect.Capabilities()
	c.MaxBindParams = 20
	return c
}

// MarkDone of more events than a statement takes placeholders splits its
// statements instead of failing every DONE write of a batch (the
// dispatcher's DoneBatchSize, 256 by default, is not bounded by the
// dialect's limit).
func TestMarkDoneSplitsPastTheDialectsPlaceholders(t *testing.T) {
	t.Parallel()
	dsn, err := sqlite.DSN(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlx.Open(fewParamsDriver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: fewParams{sqlite.Dialect}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 50)
	for i := range ids {
		env, err := core.NewEvent("E").ID(fmt.Sprintf("e-%d", i)).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Insert(t.Context(), db, env, testLease); err != nil {
			t.Fatal(err)
		}
		ids[i] = env.ID()
	}
	n, err := st.MarkDone(t.Context(), testOwner, ids)
	if err != nil || n != int64(len(ids)) {
		t.Fatalf("MarkDone of %d events = %d, %v; want all of them", len(ids), n, err)
	}
	counts, err := st.CountByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if counts[core.StatusDone] != len(ids) {
		t.Fatalf("counts = %v, want %d DONE", counts, len(ids))
	}
}
