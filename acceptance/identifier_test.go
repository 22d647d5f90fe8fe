package acceptance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
)

// The table name from configuration is only ever an identifier: outbox.New
// rejects anything but a plain identifier with core.ErrInvalidIdentifier
// before it touches the database (with or without SkipSchema), so no
// table is created, dropped or changed, and nothing is logged.
func TestIdentifierTableNameSQLite(t *testing.T) { testIdentifierTableName(t, sqliteHarness) }

// See TestIdentifierTableNameSQLite.
func TestIdentifierTableNameMySQL(t *testing.T) { testIdentifierTableName(t, mysqlHarness) }

// See TestIdentifierTableNameSQLite.
func TestIdentifierTableNamePostgres(t *testing.T) { testIdentifierTableName(t, postgresHarness) }

// The owner token from configuration is data, never SQL: an owner made of
// quotes and SQL is written to locked_by and fences the status writes as
// is, and the business table it names survives.
func TestIdentifierOwnerIsDataSQLite(t *testing.T) { testIdentifierOwnerIsData(t, sqliteHarness) }

// See TestIdentifierOwnerIsDataSQLite.
func TestIdentifierOwnerIsDataMySQL(t *testing.T) { testIdentifierOwnerIsData(t, mysqlHarness) }

// See TestIdentifierOwnerIsDataSQLite.
func TestIdentifierOwnerIsDataPostgres(t *testing.T) { testIdentifierOwnerIsData(t, postgresHarness) }

// maliciousTableNames are table names that would change a statement if
// they were pasted into it, or that are not plain identifiers.
var maliciousTableNames = []string{
	"orders; DROP TABLE orders",
	"outbox_event; DROP TABLE orders; --",
	"outbox_event` ; DROP TABLE orders; -- ",
	"outbox_event\"; DROP TABLE orders; --",
	"outbox_event' OR '1'='1",
	"outbox_event]; DROP TABLE orders; --",
	"`orders`",
	"orders--",
	"orders /* x */",
	"orders(id)",
	"main.orders",
	"outbox_event\n",
	"outbox\x00event",
	"outbox_event\u200b", // zero-width space
	"ｏｕｔｂｏｘ",             // full-width letters
	"1outbox",
	strings.Repeat("t", 49),
}

func testIdentifierTableName(t *testing.T, h Harness) {
	t.Parallel()
	ctx := context.Background()
	db := h.Open(t)
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id VARCHAR(64) NOT NULL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO orders (id) VALUES ('o-1')`); err != nil {
		t.Fatal(err)
	}
	before := schemaObjects(t, db, h)
	// A closed pool fails every access: New must fail on the name first.
	closed := h.Open(t)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &testsupport.LogBuffer{}
	for _, name := range maliciousTableNames {
		for _, skip := range []bool{false, true} {
			for _, pool := range []*sqlx.DB{db, closed} {
				cfg := outbox.Config{Store: jdbcstore.Config{Table: name}, SkipSchema: skip, Logger: logs.Logger()}
				ob, err := outbox.New(ctx, pool, cfg)
				if !errors.Is(err, core.ErrInvalidIdentifier) || ob != nil {
					t.Errorf("New(Table: %q, SkipSchema: %v, closed pool: %v) = %v, %v; want core.ErrInvalidIdentifier",
						name, skip, pool == closed, ob != nil, err)
				}
			}
		}
	}
	if after := schemaObjects(t, db, h); !slices.Equal(after, before) {
		t.Errorf("schema changed by rejected configurations: %q, was %q", after, before)
	}
	var n int
	if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM orders`); err != nil || n != 1 {
		t.Errorf("business table after rejected configurations: %d rows, %v", n, err)
	}
	if out := logs.String(); out != "" {
		t.Errorf("rejected configurations logged:\n%s", out)
	}
}

// schemaObjects lists the tables and indexes of the test database.
func schemaObjects(t *testing.T, db *sqlx.DB, h Harness) []string {
	t.Helper()
	var query string
	switch h.Name {
	case "sqlite":
		query = `SELECT type || ':' || name FROM sqlite_master ORDER BY 1`
	case "postgres":
		// Every relation (tables, indexes, sequences, views) of the test's
		// schema.
		query = `SELECT c.relkind::text || ':' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = current_schema() ORDER BY 1`
	default:
		query = `SELECT CONCAT(table_name, ':', index_name) FROM information_schema.statistics WHERE table_schema = DATABASE()
			UNION SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1`
	}
	var out []string
	if err := db.SelectContext(context.Background(), &out, query); err != nil {
		t.Fatalf("list schema objects: %v", err)
	}
	return out
}

func testIdentifierOwnerIsData(t *testing.T, h Harness) {
	t.Parallel()
	const owner = "node'; DROP TABLE orders; -- `\"\\ x"
	f := newFixture(t, h, true, func(c *outbox.Config) {
		c.Dispatcher.Owner = owner
		c.Poller.SkipRecent = -1
	})
	ctx := context.Background()
	if _, err := f.db.ExecContext(ctx, `CREATE TABLE orders (id VARCHAR(64) NOT NULL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	entered, gate := gatedListener(f, "OrderPlaced", nil)
	lockedBy := func(id string) string {
		t.Helper()
		var by *string
		if err := f.db.GetContext(ctx, &by, f.db.Rebind(`SELECT locked_by FROM outbox_event WHERE event_id = ?`), id); err != nil {
			t.Fatal(err)
		}
		if by == nil {
			return ""
		}
		return *by
	}

	// Hot path: the insert leases the row to the owner, DONE is fenced on it.
	hot := mustEvent(t, core.NewEvent("OrderPlaced").PayloadJSONString(`{}`))
	if err := f.publish(t, nil, hot); err != nil {
		t.Fatal(err)
	}
	<-entered
	if got := lockedBy(hot.ID()); got != owner {
		t.Errorf("locked_by of a published event = %q, want the owner %q", got, owner)
	}
	close(gate)
	f.waitStatus(t, hot.ID(), core.StatusDone)

	// Cold path: the poller's claim writes the owner, DONE is fenced on it.
	cold := mustEvent(t, core.NewEvent("OrderPlaced").PayloadJSONString(`{}`))
	if err := parts.Outbox(f.ob).Store.Insert(ctx, f.db, cold, core.Lease{}); err != nil {
		t.Fatal(err)
	}
	// On a database that announces commits the poller may also run by
	// itself (woken by a notification): either claim will do.
	waitFor(t, "the poller to claim the unowned row", func() bool {
		if _, err := parts.Outbox(f.ob).Poller.PollOnce(ctx); err != nil {
			t.Fatalf("PollOnce: %v", err)
		}
		select {
		case id := <-entered:
			if id != cold.ID() {
				t.Fatalf("listener entered for %s, want %s", id, cold.ID())
			}
			return true
		default:
			return false
		}
	})
	f.waitStatus(t, cold.ID(), core.StatusDone)

	var n int
	if err := f.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM orders`); err != nil {
		t.Fatalf("business table after running with owner %q: %v", owner, err)
	}
}
