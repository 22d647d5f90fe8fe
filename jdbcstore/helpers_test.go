package jdbcstore_test

import (
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// openTestStore returns a store on a new database file opened with
// sqlite.Open, with the schema applied, and the file's path.
func openTestStore(t *testing.T, cfg jdbcstore.Config) (*jdbcstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, path
}

// openRaw opens path with the "sqlite3" driver and exactly the given DSN
// parameters (no sqlite.Open defaults).
func openRaw(t *testing.T, path, params string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("sqlite3", path+"?"+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func mustEnv(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}
