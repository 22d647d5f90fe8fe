package acceptance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
)

// Connections killed under load (see testKilledConnections):
// pg_terminate_backend of every backend of the framework's pool, found in
// pg_stat_activity by the pool's own application_name (never another
// session of the shared server), while an admin transaction holds the
// outbox table with LOCK TABLE … IN ACCESS EXCLUSIVE MODE. The
// notification listener's connection is terminated too: it reconnects,
// and polling carries the flow meanwhile.
func TestOutagePostgresKilledBackends(t *testing.T) {
	e := testKilledConnections(t, newPostgresOutage(t, testdb.PostgresSchemaDSN(t)))
	lost := e.logs.Count("level=WARN", "notification listener lost its connection")
	if lost == 0 {
		t.Fatal("the notification listener never logged the loss of its connection")
	}
	waitLong(t, "the notification listener to recover from every loss", func() bool {
		return e.logs.Count("level=INFO", "notification listener recovered") == lost
	})
	t.Logf("the notification listener lost its connection and recovered %d times", lost)
}

// A server restart while events flow (see testServerRestart), on a private
// PostgreSQL server: a fast shutdown (SIGINT) or a crash (SIGKILL of the
// postmaster and every backend: WAL recovery on the next start).
func TestOutagePostgresServerRestart(t *testing.T) {
	testServerRestarts(t, func(t *testing.T) privateServer {
		server := testdb.StartPostgres(t)
		return privateServer{newPostgresOutage(t, server.DSN()), server.Stop, server.Kill, server.Start}
	})
}

// postgresOutage is a PostgreSQL database (or schema) for an outage test.
// The framework's pool connects with an application_name of its own,
// which is how its backends are found; the admin's does not.
type postgresOutage struct {
	t         *testing.T
	dsn       string
	app       string // the framework's application_name
	db, admin *sqlx.DB
}

// newPostgresOutage opens the pools on dsn, a database or schema no other
// test uses.
func newPostgresOutage(t *testing.T, dsn string) *postgresOutage {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	app := "outbox_outage_" + hex.EncodeToString(rnd[:])
	return &postgresOutage{t: t, dsn: dsn, app: app,
		db:    testdb.OpenPostgres(t, testdb.WithPostgresParam(t, dsn, "application_name", app)),
		admin: testdb.OpenPostgres(t, testdb.WithPostgresParam(t, dsn, "application_name", app+"_admin")),
	}
}

func (p *postgresOutage) pools() (framework, admin *sqlx.DB) { return p.db, p.admin }

// table is unqualified: the admin's search_path is the test's schema.
func (p *postgresOutage) table(name string) string { return name }

func (p *postgresOutage) addr() string {
	u, err := url.Parse(p.dsn)
	if err != nil {
		p.t.Fatal(err)
	}
	return u.Host
}

func (p *postgresOutage) lockTable(ctx context.Context) (pending int, unlock func() error) {
	t := p.t
	t.Helper()
	tx, err := p.admin.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "LOCK TABLE "+p.table("outbox_event")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		_ = tx.Rollback()
		t.Fatalf("lock the outbox table: %v", err)
	}
	if err := tx.GetContext(ctx, &pending, "SELECT COUNT(*) FROM "+p.table("outbox_event")+" WHERE status <> $1", int(core.StatusDone)); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	return pending, tx.Rollback
}

func (p *postgresOutage) blocked(pattern string) int {
	var n int
	err := p.admin.GetContext(context.Background(), &n,
		`SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE $2`,
		p.app, pattern)
	if err != nil {
		p.t.Fatalf("pg_stat_activity: %v", err)
	}
	return n
}

func (p *postgresOutage) killFramework() int {
	t := p.t
	t.Helper()
	ctx := context.Background()
	var pids []int64
	if err := p.admin.SelectContext(ctx, &pids,
		`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, p.app); err != nil {
		t.Fatalf("pg_stat_activity: %v", err)
	}
	for _, pid := range pids {
		// false: the backend has gone already.
		if _, err := p.admin.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatalf("pg_terminate_backend(%d): %v", pid, err)
		}
	}
	if len(pids) > 0 {
		waitLong(t, "the terminated backends to go", func() bool {
			var n int
			if err := p.admin.GetContext(ctx, &n, `SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids); err != nil {
				t.Fatalf("pg_stat_activity: %v", err)
			}
			return n == 0
		})
	}
	return len(pids)
}

func (p *postgresOutage) uptime() time.Duration {
	var seconds float64
	if err := p.admin.GetContext(context.Background(), &seconds,
		`SELECT EXTRACT(EPOCH FROM clock_timestamp() - pg_postmaster_start_time())::float8`); err != nil {
		p.t.Fatal(err)
	}
	return time.Duration(seconds * float64(time.Second))
}
