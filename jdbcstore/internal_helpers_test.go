package jdbcstore

import (
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// openTestStore returns a store on a new database file opened with
// OpenSQLite, with the schema applied, and the file's path.
func openTestStore(t *testing.T, cfg Config) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	db, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, path
}

// openRaw opens path with the "sqlite3" driver and exactly the given DSN
// parameters (no OpenSQLite defaults).
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
