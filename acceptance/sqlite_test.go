package acceptance

import (
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// sqliteHarness opens a new SQLite file per test: the embedded default
// database, no server needed.
var sqliteHarness = Harness{
	Name:   "sqlite",
	NowSQL: `SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')`,
	Open: func(t *testing.T) *sqlx.DB {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	},
}

func TestAcceptanceSQLite(t *testing.T) { Run(t, sqliteHarness) }
