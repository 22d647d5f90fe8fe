package tenant_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/tenant"
	"github.com/outbox-go/outbox/txctx"
)

// waitTimeout bounds every wait: generous for a loaded 2-core machine
// running -race, still a clear failure when something never happens.
const waitTimeout = 20 * time.Second

// sqliteDatabases returns n SQLite files in a temporary directory: s1, s2, …
func sqliteDatabases(t testing.TB, n int) []tenant.Database {
	t.Helper()
	dir := t.TempDir()
	out := make([]tenant.Database, n)
	for i := range out {
		id := fmt.Sprintf("s%d", i+1)
		out[i] = tenant.Database{ID: id, Driver: "sqlite3", DSN: filepath.Join(dir, id+".db")}
	}
	return out
}

// serverDatabases returns n new, empty databases of driver: <prefix>1,
// <prefix>2, …, each with the DSN newDSN returns.
func serverDatabases(t testing.TB, n int, prefix, driver string, newDSN func(testing.TB) string) []tenant.Database {
	t.Helper()
	out := make([]tenant.Database, n)
	for i := range out {
		out[i] = tenant.Database{ID: fmt.Sprintf("%s%d", prefix, i+1), Driver: driver, DSN: newDSN(t)}
	}
	return out
}

// mixedDatabases returns the mixed set: three SQLite files (s1, s2, s3),
// two MariaDB databases (m1, m2) and two PostgreSQL databases (p1, p2,
// schemas of the test database). The test skips without
// OUTBOX_TEST_MYSQL_DSN and OUTBOX_TEST_POSTGRES_DSN (fails with CI=true).
func mixedDatabases(t testing.TB) []tenant.Database {
	t.Helper()
	return slices.Concat(sqliteDatabases(t, 3),
		serverDatabases(t, 2, "m", "mysql", func(t testing.TB) string { return testdb.MySQLConfig(t).FormatDSN() }),
		serverDatabases(t, 2, "p", "pgx", testdb.PostgresSchemaDSN))
}

// databaseSets are the sets every multi-database test runs on: three SQLite
// files, and the mixed set of the three databases.
var databaseSets = []struct {
	name string
	make func(t testing.TB) []tenant.Database
}{
	{"SQLite", func(t testing.TB) []tenant.Database { return sqliteDatabases(t, 3) }},
	{"SQLiteMariaDBPostgreSQL", mixedDatabases},
}

// quietLogger discards logs.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// deliveries records listener calls: event id → tenant ids seen, and the
// order of tenant ids.
type deliveries struct {
	mu     sync.Mutex
	byID   map[string]int
	order  []string
	stores map[string]string // event id -> tenant.StoreID of its listener's ctx
}

func newDeliveries() *deliveries {
	return &deliveries{byID: map[string]int{}, stores: map[string]string{}}
}

func (d *deliveries) listener(ctx context.Context, env core.Envelope) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byID[env.TenantID()+"/"+env.ID()]++
	d.order = append(d.order, env.TenantID())
	d.stores[env.ID()] = tenant.StoreID(ctx)
	return nil
}

// store returns the database the listener's ctx named for the event.
func (d *deliveries) store(eventID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stores[eventID]
}

func (d *deliveries) count(tenantID, eventID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byID[tenantID+"/"+eventID]
}

// runs compresses the delivery order into runs: "a×5 b×5".
func (d *deliveries) runs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var parts []string
	for i := 0; i < len(d.order); {
		j := i
		for j < len(d.order) && d.order[j] == d.order[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s×%d", d.order[i], j-i))
		i = j
	}
	return strings.Join(parts, " ")
}

// row is what the tests read back from an outbox table.
type row struct {
	ID     string
	Tenant string
	Status core.Status
}

// readRows returns every row of the outbox table of db, by event id.
func readRows(t testing.TB, db *sqlx.DB) map[string]row {
	t.Helper()
	rows, err := db.Query(`SELECT event_id, COALESCE(tenant_id, ''), status FROM ` + jdbcstore.DefaultTable)
	if err != nil {
		t.Fatalf("read outbox rows: %v", err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ID, &r.Tenant, &r.Status); err != nil {
			t.Fatal(err)
		}
		out[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// openAgain opens a database of the set on a pool of the test's own.
func openAgain(t testing.TB, d tenant.Database) *sqlx.DB {
	t.Helper()
	db, err := tenant.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// ids returns the ids of dbs, sorted.
func ids(dbs []tenant.Database) []string {
	out := make([]string, len(dbs))
	for i, d := range dbs {
		out[i] = d.ID
	}
	sort.Strings(out)
	return out
}

// publish commits one business row and one event into tenant id's
// database and returns the event id.
func publish(ctx context.Context, o *tenant.Outbox, id string) (string, error) {
	tn, err := o.For(id)
	if err != nil {
		return "", err
	}
	env, err := core.NewEvent("OrderPlaced").TenantID(id).PayloadJSONString(`{"n":1}`).Build()
	if err != nil {
		return "", err
	}
	err = tn.InTx(ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if _, err := tx.ExecContext(ctx, tn.DB().Rebind(`INSERT INTO orders (ref) VALUES (?)`), env.ID()); err != nil {
			return err
		}
		_, err := tn.Publish(ctx, env)
		return err
	})
	return env.ID(), err
}

// withOrders creates the business table "orders" in every database of dbs
// and returns dbs.
func withOrders(t testing.TB, dbs []tenant.Database) []tenant.Database {
	t.Helper()
	for _, d := range dbs {
		db, err := tenant.Open(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec(`CREATE TABLE IF NOT EXISTS orders (ref VARCHAR(64) NOT NULL)`)
		_ = db.Close()
		if err != nil {
			t.Fatalf("create orders in %s: %v", d.ID, err)
		}
	}
	return dbs
}

// waitFor re-checks cond until it holds and fails the test at waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testsupport.WaitFor(t, waitTimeout, what, cond)
}
