package storetest_test

import (
	"path/filepath"
	"testing"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/jdbcstore/storetest"
)

// A database driver proves it keeps the store's guarantees (leases,
// fenced status writes, claim order, time precision, error mapping) by
// running the conformance suite from its own tests. The Harness hands the
// suite a fresh store with the schema applied; the suite runs its cases in
// parallel, each on a store of its own. In a file such as
// mydriver_test.go, the test below is written as
//
//	func TestConformance(t *testing.T) { storetest.Run(t, harness) }
//
// This example is compiled but not run: it needs the *testing.T of a test.
func ExampleRun() {
	harness := storetest.Harness{
		Name: "sqlite", // labels the subtests: TestConformance/sqlite/...
		NewStore: func(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store {
			t.Helper()
			// Open a fresh database (or a table nobody else uses) with
			// your driver; the suite's cases run in parallel.
			db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = db.Close() })
			cfg.Dialect = sqlite.Dialect // your dialect; keep the other fields the suite set
			st, err := jdbcstore.New(db, cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := st.ApplySchema(t.Context()); err != nil {
				t.Fatalf("ApplySchema: %v", err)
			}
			return st
		},
	}

	testConformance := func(t *testing.T) { storetest.Run(t, harness) }
	_ = testConformance
}
