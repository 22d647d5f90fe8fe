// Package storetest is the conformance suite every jdbcstore dialect must
// pass. A database-specific test provides a [Harness] and calls [Run]:
//
//	func TestSQLiteConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Name: "sqlite", NewStore: newSQLiteStore})
//	}
//
// The suite uses only the public Store API and, where it needs the
// database directly, portable statements with '?' placeholders through
// Store.DB(), so it runs unchanged against every database.
package storetest

import (
	"testing"

	"github.com/outbox-go/outbox/jdbcstore"
)

// Harness connects the suite to one database.
type Harness struct {
	// Name labels the subtests, e.g. "sqlite" or "mariadb".
	Name string
	// NewStore returns a store built with cfg on a fresh database (or a
	// fresh table nobody else uses), with the schema applied. It sets
	// cfg.Dialect when needed and keeps the other fields the suite sets
	// (Table, Now, MaxErrorLen, Logger). It registers its own cleanup with
	// t and fails t on error. It must be safe to call from parallel
	// subtests.
	NewStore func(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store
}

// Run runs every conformance subtest against h. Subtests run in parallel,
// each on its own store.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("storetest: Harness.NewStore is nil")
	}
	run := func(t *testing.T) {
		s := &suite{h: h}
		t.Run("Insert", s.testInsert)
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
