package main

import (
	"testing"

	"github.com/outbox-go/outbox/internal/testdb"
)

// Ordered delivery on MySQL/MariaDB (a scratch database on the server of
// OUTBOX_TEST_MYSQL_DSN) with three children at once: lost=0 phantom=0
// order_violations=0 seq_mismatch=0.
func TestTortureOrderedMySQL(t *testing.T) {
	runTorture(t, "mysql", "-dsn", testdb.MySQLDSN(t), "-ordered", "-keys", "20", "-procs", "3", "-cycles", "4")
}
