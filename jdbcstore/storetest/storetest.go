// Package storetest is the conformance suite every jdbcstore dialect must
// pass: ours (jdbcstore/sqlite, jdbcstore/mysql, jdbcstore/postgres) and a third party's. It
// imports no database driver; the test of a dialect package provides a
// [Harness] that opens its database and calls [Run].
//
// A driver author adds a database in four steps:
//
//  1. Implement [jdbcstore.Dialect] (primitives, capabilities, error
//     classes, time and payload encoding, schema templates).
//  2. Call jdbcstore.Register(Dialect) from the package's init function.
//  3. Write a test with a Harness: NewStore opens a fresh database (or
//     schema: the suite creates tables of fixed names beside the store's,
//     and expects the default table name where it sets none), builds the
//     store with jdbcstore.New and applies the schema; Dialect is the
//     dialect under test; Contend provokes lock contention (see
//     [RowLockContention]).
//  4. Run it with the -race flag, on every server version supported.
//
// For example:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Name:    "mydb",
//			Dialect: mydb.Dialect,
//			NewStore: func(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store {
//				db, err := sqlx.Open("mydb", freshDatabaseDSN(t))
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { _ = db.Close() })
//				cfg.Dialect = mydb.Dialect
//				st, err := jdbcstore.New(db, cfg)
//				if err != nil {
//					t.Fatal(err)
//				}
//				if err := st.ApplySchema(t.Context()); err != nil {
//					t.Fatal(err)
//				}
//				return st
//			},
//		})
//	}
//
// The suite uses only the public Store API and, where it needs the
// database directly, portable statements with '?' placeholders (rebound
// to the dialect's bind type) through Store.DB(), so it runs unchanged
// against every database.
package storetest

import (
	"reflect"
	"testing"

	"github.com/outbox-go/outbox/jdbcstore"
)

// Harness connects the suite to one database.
type Harness struct {
	// Name labels the subtests, e.g. "sqlite" or "mariadb".
	Name string
	// NewStore returns a store built with cfg on a fresh database (or
	// schema) of its own, with the schema applied: the suite creates
	// tables of fixed names on a store's database (storetest_inbox,
	// storetest_effect, outbox tables of its own), and expects the
	// default table name where it sets no Table. It sets
	// cfg.Dialect when needed and keeps the other fields the suite sets
	// (Table, Now, MaxErrorLen, Logger). It registers its own cleanup with
	// t and fails t on error. It must be safe to call from parallel
	// subtests.
	NewStore func(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store
	// Dialect is the dialect under test. When set, the suite also checks
	// the dialect's own contract (names, capabilities, codecs that never
	// panic, error classes, schema templates), that NewStore's stores
	// use it, and its inbox table through package inbox (on the database
	// of a store of NewStore: a table storetest_inbox and a business table
	// storetest_effect).
	Dialect jdbcstore.Dialect
	// Contend, when set with Dialect, makes a statement on the database of
	// st meet lock contention the store should wait out and retry, and
	// returns the driver's error: a row held locked while another
	// connection with a short lock timeout updates it (see
	// [RowLockContention]), or a second connection writing, with no busy
	// timeout, while another holds SQLite's write lock. The suite checks
	// that Classify says [jdbcstore.ClassBusy] for it, as it is and
	// wrapped: a dialect that never does makes the store fail at once
	// where it should retry (status writes, the inbox's Process). Without
	// it the Contention subtest is skipped, saying so.
	Contend func(t *testing.T, st *jdbcstore.Store) error
	// LegacyOutboxSchema, when set with Dialect, is the DDL of the outbox
	// table of an earlier release (a template like Dialect.OutboxSchema):
	// the suite creates such a table next to NewStore's and checks that
	// ApplySchema upgrades it (see jdbcstore.SchemaUpgrader).
	LegacyOutboxSchema string
}

// Run runs every conformance subtest against h. Subtests run in parallel,
// each on its own store.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("storetest: Harness.NewStore is nil")
	}
	if h.Dialect != nil && !reflect.TypeOf(h.Dialect).Comparable() {
		// The suite compares dialects with ==, as the registry does.
		t.Fatalf("storetest: Harness.Dialect: its type %T is not comparable (==); use a pointer to it", h.Dialect)
	}
	run := func(t *testing.T) {
		s := &suite{h: h}
		t.Run("Insert", s.testInsert)
		t.Run("Batch", s.testBatch)
		t.Run("Payload", s.testPayload)
		t.Run("MarkDone", s.testMarkDone)
		t.Run("MarkRetry", s.testMarkRetry)
		t.Run("MarkDead", s.testMarkDead)
		t.Run("Postpone", s.testPostpone)
		t.Run("DoneRowIsFinal", s.testDoneRowIsFinal)
		t.Run("LastError", s.testLastError)
		t.Run("PollPending", s.testPollPending)
		t.Run("CountByStatus", s.testCountByStatus)
		t.Run("Get", s.testGet)
		t.Run("Schema", s.testSchema)
		t.Run("Config", s.testConfig)
		t.Run("Concurrency", s.testConcurrency)
		t.Run("BusinessLoad", s.testBusinessLoad)
		t.Run("Fence", s.testFence)
		t.Run("Claim", s.testClaim)
		t.Run("Reap", s.testReap)
		t.Run("ReleaseLeases", s.testReleaseLeases)
		t.Run("NotBefore", s.testNotBefore)
		t.Run("Ops", s.testOps)
		t.Run("DeadSummaries", s.testDeadSummaries)
		t.Run("DeadTypes", s.testDeadTypes)
		t.Run("TrailingSpaces", s.testTrailingSpaces)
		t.Run("Activity", s.testActivity)
		t.Run("Order", s.testOrder)
		if h.Dialect != nil {
			t.Run("ConcurrentSchema", s.testConcurrentSchema)
		}
		if h.LegacyOutboxSchema != "" && h.Dialect != nil {
			t.Run("UpgradeLegacyTable", s.testUpgrade)
			t.Run("HalfUpgradedTable", s.testHalfUpgraded)
			t.Run("UpgradeBehindOpenTransaction", s.testUpgradeBehindOpenTransaction)
		}
		if h.Dialect != nil {
			t.Run("Dialect", s.testDialect)
			t.Run("Contention", s.testContention)
			t.Run("Inbox", s.testInbox)
			t.Run("ForeignTable", s.testForeignTable)
		}
	}
	if h.Name == "" {
		run(t)
		return
	}
	t.Run(h.Name, run)
}

// suite carries the harness to the subtests.
type suite struct {
	h Harness
}
