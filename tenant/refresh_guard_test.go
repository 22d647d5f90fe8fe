package tenant_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/tenant"
)

// An OpenFunc that panics while the periodic refresh opens a new database
// leaves that database out (an ERROR), as one that fails does: the panic
// ended the process from the refresh goroutine (an audit), which only
// Discover was guarded against.
func TestPeriodicRefreshSurvivesAPanickingOpen(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 2)
	var calls atomic.Int32
	discover := func(context.Context) ([]tenant.Database, error) {
		if calls.Add(1) == 1 {
			return dbs[:1], nil // New's
		}
		return dbs, nil
	}
	open := func(ctx context.Context, d tenant.Database) (*sqlx.DB, error) {
		if d.ID == dbs[1].ID {
			panic("OpenFunc bug")
		}
		return tenant.Open(ctx, d)
	}
	logger, logs := testsupport.NewLogger()
	ob, err := tenant.New(ctx, tenant.Config{Discover: discover, Open: open, RefreshInterval: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	if err := ob.Start(ctx); err != nil { // starts the periodic refresh
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the failed open logged", func() bool {
		return logs.Count("level=ERROR", "cannot open database", "the OpenFunc function panicked: OpenFunc bug") > 0
	})
	if got := ob.StoreIDs(); len(got) != 1 || got[0] != dbs[0].ID {
		t.Errorf("StoreIDs = %v, want only %s", got, dbs[0].ID)
	}
	// The same from a Refresh of the caller's: an error, not a panic.
	if res, err := ob.Refresh(ctx); err == nil || len(res.Failed) != 1 {
		t.Errorf("Refresh with a panicking OpenFunc = %+v, %v; want the database named in Failed", res, err)
	}
}

// A periodic discovery that does not return (a directory service that
// never answers, its call waiting on ctx) is cut at its bound and logged
// as a failed refresh, and the next refresh runs: it held the refresh loop
// for good, silently, until Close (an audit).
func TestPeriodicDiscoveryIsBounded(t *testing.T) {
	t.Cleanup(tenant.SetDiscoverTimeout(50 * time.Millisecond)) // restored after the outbox closed
	ctx := context.Background()
	dbs := sqliteDatabases(t, 2)
	var calls atomic.Int32
	discover := func(ctx context.Context) ([]tenant.Database, error) {
		switch calls.Add(1) {
		case 1:
			return dbs[:1], nil // New's
		case 2:
			<-ctx.Done() // never answers
			return nil, ctx.Err()
		default:
			return dbs, nil
		}
	}
	logger, logs := testsupport.NewLogger()
	ob, err := tenant.New(ctx, tenant.Config{Discover: discover, RefreshInterval: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	if err := ob.Start(ctx); err != nil { // starts the periodic refresh
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the database of the next discovery added", func() bool { return len(ob.StoreIDs()) == 2 })
	if n := logs.Count("level=ERROR", "refresh of the set of databases failed", "the Discover function did not return within 50ms"); n != 1 {
		t.Errorf("%d ERROR lines for the discovery cut at its bound, want 1:\n%s", n, logs)
	}
}
