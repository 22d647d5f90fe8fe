package inbox_test

import "testing"

// TestSQLite runs the behaviour suite on SQLite files opened with
// sqlite.Open.
func TestSQLite(t *testing.T) { runSuite(t, openSQLite) }

// TestConcurrentRedeliverySQLite: see testConcurrentRedelivery.
func TestConcurrentRedeliverySQLite(t *testing.T) { testConcurrentRedelivery(t, openSQLite) }
