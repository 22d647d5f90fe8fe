package sqlite_test

import (
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
	storetest.Run(t, storetest.Harness{Name: "sqlite", NewStore: newSQLiteStore, Dialect: sqlite.Dialect, LegacyOutboxSchema: legacyOutboxSchema})
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
