package tenant_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
)

// notifyDeadline bounds a delivery that only a notification can bring
// about in time: the poller rests for an hour.
const notifyDeadline = 10 * time.Second

// Two PostgreSQL databases (each its own database: LISTEN/NOTIFY channels
// are per database) in one tenant.Outbox whose poller rests for an hour.
// An event committed on a plain *sql.Tx (no hot path) in either database
// is delivered within seconds: that database's listener wakes the poll of
// that database, whatever the Selector would read next (a poll of the
// other one would not see it, nor would an ordinary poll of the right one,
// which skips rows younger than SkipRecent). A database that leaves the
// set stops listening (its connection goes), and listens again when it
// comes back. The latency from commit to listener is logged.
func TestNotifyWakesThePollOfItsDatabasePostgres(t *testing.T) {
	dbs := []tenant.Database{
		{ID: "a", Driver: "pgx", DSN: testdb.PostgresDatabaseDSN(t)},
		{ID: "b", Driver: "pgx", DSN: testdb.PostgresDatabaseDSN(t)},
	}
	o, _ := newOutbox(t, tenant.Config{Databases: dbs, Poller: poller.Config{Interval: time.Hour}})
	seen := make(chan string, 16)
	o.RegisterFunc("Pinged", func(_ context.Context, e core.Envelope) error { seen <- e.ID(); return nil })
	deliver := func(id string) time.Duration {
		t.Helper()
		tn, err := o.For(id)
		if err != nil {
			t.Fatal(err)
		}
		env, err := core.NewEvent("Pinged").TenantID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		tx, err := tn.DB().BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tn.PublishTx(t.Context(), tx, env); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		got := testsupport.Recv(t, notifyDeadline, seen, "the delivery of an event committed in "+id)
		if got != env.ID() {
			t.Fatalf("delivered %s, want %s", got, env.ID())
		}
		return time.Since(committed)
	}

	const n = 40
	lat := make([]time.Duration, 0, n)
	for i := range n {
		lat = append(lat, deliver([]string{"a", "b"}[i%2]))
	}
	slices.Sort(lat)
	t.Logf("commit → listener over %d events alternating between two databases (Poller.Interval 1h): p50 %v, p99 %v, max %v",
		n, lat[n/2], lat[n*99/100], lat[n-1])

	// b leaves the set: its listener stops and gives its connection back
	// before the pool closes; b comes back and listens again.
	b, _ := o.For("b")
	var bName string
	if err := b.DB().Get(&bName, "SELECT current_database()"); err != nil {
		t.Fatal(err)
	}
	admin := testdb.OpenPostgres(t, testdb.PostgresDSN(t))
	listening := func() int {
		var c int
		if err := admin.Get(&c, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN %'`, bName); err != nil {
			t.Fatal(err)
		}
		return c
	}
	waitFor(t, "b's listener connection", func() bool { return listening() == 1 })
	if res, err := o.SetDatabases(t.Context(), dbs[:1]); err != nil || !slices.Equal(res.Removed, []string{"b"}) {
		t.Fatalf("SetDatabases(a) = %+v, %v", res, err)
	}
	waitFor(t, "b's listener connection to end", func() bool { return listening() == 0 })
	if res, err := o.SetDatabases(t.Context(), dbs); err != nil || !slices.Equal(res.Added, []string{"b"}) {
		t.Fatalf("SetDatabases(a, b) = %+v, %v", res, err)
	}
	t.Logf("after b rejoined the set: commit → listener %v", deliver("b"))
}
