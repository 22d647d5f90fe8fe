package acceptance

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/testdb"
)

// mysqlHarness gives every test its own database on the MySQL/MariaDB
// server of OUTBOX_TEST_MYSQL_DSN (see internal/testdb); the tests skip
// without it, and fail with CI=true.
var mysqlHarness = Harness{
	Name:   "mysql",
	NowSQL: `SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')`,
	Open:   func(t *testing.T) *sqlx.DB { return testdb.MySQL(t) },
}

func TestAcceptanceMySQL(t *testing.T) { Run(t, mysqlHarness) }
