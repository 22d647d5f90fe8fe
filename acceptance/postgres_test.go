package acceptance

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/testdb"
)

// postgresHarness gives every test its own schema in the PostgreSQL
// database of OUTBOX_TEST_POSTGRES_DSN (see internal/testdb); the tests
// skip without it, and fail with CI=true.
var postgresHarness = Harness{
	Name: "postgres",
	// clock_timestamp, not now(): now() is the start of the transaction.
	NowSQL: `SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`,
	Open:   func(t *testing.T) *sqlx.DB { return testdb.Postgres(t) },
}

func TestAcceptancePostgres(t *testing.T) { Run(t, postgresHarness) }
