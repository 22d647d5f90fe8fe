package postgres_test

import (
	_ "embed"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/storetest"
)

// These tests need a PostgreSQL 13+ server: see package internal/testdb
// (OUTBOX_TEST_POSTGRES_DSN). Each store gets its own schema.

// newPGStore returns a store with the schema applied on db.
func newPGStore(t *testing.T, db *sqlx.DB, cfg jdbcstore.Config) *jdbcstore.Store {
	t.Helper()
	cfg.Dialect = postgres.Dialect
	st, err := jdbcstore.New(db, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatalf("ApplySchema: %v", err)
	}
	return st
}

// pgHarness opens a new schema per store; edit (optional) changes the
// DSN.
func pgHarness(name string, edit func(t *testing.T, dsn string) string) storetest.Harness {
	return storetest.Harness{Name: name, Dialect: postgres.Dialect, LegacyOutboxSchema: legacyOutboxSchema, NewStore: func(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store {
		t.Helper()
		dsn := testdb.PostgresSchemaDSN(t)
		if edit != nil {
			dsn = edit(t, dsn)
		}
		return newPGStore(t, testdb.OpenPostgres(t, dsn), cfg)
	}, Contend: func(t *testing.T, st *jdbcstore.Store) error {
		return storetest.RowLockContention(t, st, "SET lock_timeout = '100ms'")
	}}
}

// The conformance suite runs unchanged, once with the DSN as configured
// and once with a session TimeZone far from UTC and the simple protocol
// (parameters interpolated by pgx, results as text).
func TestPostgresConformance(t *testing.T) {
	storetest.Run(t, pgHarness("postgres", nil))
	storetest.Run(t, pgHarness("postgres_tz0530_simpleprotocol", func(t *testing.T, dsn string) string {
		dsn = testdb.WithPostgresParam(t, dsn, "timezone", "Asia/Kolkata")
		return testdb.WithPostgresParam(t, dsn, "default_query_exec_mode", "simple_protocol")
	}))
}

const testOwner = "pg-test-owner"

var testLease = core.Lease{Owner: testOwner, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}

func mustBuild(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// legacyOutboxSchema is the outbox table of an earlier release, which
// ApplySchema must upgrade.
//
//go:embed testdata/outbox_before_ordering.sql
var legacyOutboxSchema string
