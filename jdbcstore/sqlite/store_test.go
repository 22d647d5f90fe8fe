package sqlite_test

import (
	"database/sql"
	_ "embed"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/jdbcstore/storetest"
)

// newSQLiteStore is the SQLite harness: a new database file per store.
func newSQLiteStore(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cfg.Dialect = sqlite.Dialect
	st, err := jdbcstore.New(db, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatalf("ApplySchema: %v", err)
	}
	return st
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{Name: "sqlite", NewStore: newSQLiteStore, Dialect: sqlite.Dialect,
		LegacyOutboxSchema: legacyOutboxSchema, Contend: writeLockContention})
}

// writeLockContention holds the write lock of st's database file in a
// transaction and writes from a second connection that has no busy
// timeout: SQLITE_BUSY at once.
func writeLockContention(t *testing.T, st *jdbcstore.Store) error {
	t.Helper()
	ctx := t.Context()
	var seq int
	var name, file string
	if err := st.DB().QueryRowContext(ctx, "PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		t.Fatal(err)
	}
	holder, err := st.DB().BeginTx(ctx, nil) // BEGIN IMMEDIATE: sqlite.Open's _txlock
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, "DELETE FROM outbox_event WHERE event_id = 'none'"); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite3", "file:"+file+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	_, err = other.ExecContext(ctx, "DELETE FROM outbox_event WHERE event_id = 'none'")
	return err
}

// The SQLite dialect stores payloads as BLOB: JSON is kept byte for byte,
// even where a JSON column would normalize it.
func TestSQLiteJSONPayloadByteExact(t *testing.T) {
	t.Parallel()
	st := newSQLiteStore(t, jdbcstore.Config{})
	const doc = "{ \"b\" : 1,\n\t\"a\":\"\\u00e9\", \"a\": 2.50, \"z\": [ ] }"
	env, err := core.NewEvent("Exact").PayloadJSONString(doc).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(t.Context(), st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Get(t.Context(), env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Payload) != doc {
		t.Fatalf("payload = %q, want %q", rec.Payload, doc)
	}
}

const testOwner = "jdbcstore-test-owner"

var testLease = core.Lease{Owner: testOwner, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}

// legacyOutboxSchema is the outbox table of an earlier release, which
// ApplySchema must upgrade.
//
//go:embed testdata/outbox_v0.1.sql
var legacyOutboxSchema string
