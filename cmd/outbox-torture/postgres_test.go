package main

import (
	"testing"

	"github.com/outbox-go/outbox/internal/testdb"
)

// Two SIGKILLed children and a draining one on PostgreSQL (a scratch
// database on the server of OUTBOX_TEST_POSTGRES_DSN): lost=0 phantom=0
// and exit status 0.
func TestTorturePostgres(t *testing.T) {
	runTorture(t, "postgres", "-dsn", testdb.PostgresDSN(t), "-cycles", "2")
}

// Ordered delivery on PostgreSQL with three children at once.
func TestTortureOrderedPostgres(t *testing.T) {
	runTorture(t, "postgres", "-dsn", testdb.PostgresDSN(t), "-ordered", "-keys", "20", "-procs", "3", "-cycles", "4")
}
