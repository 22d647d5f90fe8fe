// Package sqlitetest opens SQLite stores for tests of the jdbcstore
// packages, so each test package does not carry its own copy.
package sqlitetest

import (
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// OpenStore returns a store on a new database file opened with
// sqlite.Open, with the schema applied, and the file's path. The pool is
// closed when t ends.
func OpenStore(t testing.TB, cfg jdbcstore.Config) (*jdbcstore.Store, string) {
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

// OpenRaw opens path with the "sqlite3" driver and exactly the given DSN
// parameters (none of sqlite.Open's defaults); the pool is closed when t
// ends.
func OpenRaw(t testing.TB, path, params string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("sqlite3", path+"?"+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
