package main

import (
	"strings"
	"testing"

	"github.com/outbox-go/outbox/internal/testdb"
)

// The example publishes and delivers one event on a MySQL/MariaDB
// database (skipped without OUTBOX_TEST_MYSQL_DSN, unless CI=true).
func TestRun(t *testing.T) {
	cfg := testdb.MySQLConfig(t)
	var out strings.Builder
	if err := run(t.Context(), cfg.FormatDSN(), &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "delivered OrderPlaced {\"order\":42}\n" {
		t.Errorf("output = %q", got)
	}
}
