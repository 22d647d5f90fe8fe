package tenant_test

import (
	"context"
	"errors"
	"github.com/outbox-go/outbox/dispatcher"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
)

// New and NewInbox check the whole Config before they open a database and
// report every problem at once, each named by its path.
func TestConfigValidatedAsAWhole(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 1)
	cfg := tenant.Config{Databases: dbs, Logger: quietLogger(), Store: jdbcstore.Config{Table: "x; DROP"}}
	cfg.Dispatcher.Workers = -1
	cfg.Poller.BatchSize = -1
	cfg.Poller.Now = time.Now
	_, err := tenant.New(ctx, cfg)
	if !errors.Is(err, core.ErrInvalidConfig) || !errors.Is(err, core.ErrInvalidIdentifier) {
		t.Fatalf("New = %v", err)
	}
	if got, want := cfgpath.Fields(err), []string{"Dispatcher.Workers", "Poller.BatchSize", "Poller.Now", "Store.Table"}; !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q (error: %v)", got, want, err)
	}

	icfg := tenant.InboxConfig{Databases: dbs, Logger: quietLogger(), Inbox: inbox.Config{Table: "bad-name", MaxErrorLen: -1},
		DrainTimeout: -1}
	icfg.Dispatcher.BatchSize = -1
	_, err = tenant.NewInbox(ctx, icfg)
	if !errors.Is(err, core.ErrInvalidConfig) || !errors.Is(err, core.ErrInvalidIdentifier) {
		t.Fatalf("NewInbox = %v", err)
	}
	if got, want := cfgpath.Fields(err), []string{"Dispatcher.BatchSize", "DrainTimeout", "Inbox.MaxErrorLen", "Inbox.Table"}; !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q (error: %v)", got, want, err)
	}
	if _, err := os.Stat(dbs[0].DSN); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a database was opened although the Config is invalid: %v", err)
	}

	// A logger without a handler (the zero slog.Logger) panicked at its
	// first line.
	zero := new(slog.Logger)
	_, err = tenant.New(ctx, tenant.Config{Databases: dbs, Logger: zero, Dispatcher: dispatcher.Config{Logger: zero}})
	if got, want := cfgpath.Fields(err), []string{"Dispatcher.Logger", "Logger"}; !slices.Equal(got, want) {
		t.Errorf("New with zero loggers: problems %q, want %q (error: %v)", got, want, err)
	}
	_, err = tenant.NewInbox(ctx, tenant.InboxConfig{Databases: dbs, Logger: zero, Inbox: inbox.Config{Logger: zero}})
	if got, want := cfgpath.Fields(err), []string{"Inbox.Logger", "Logger"}; !slices.Equal(got, want) {
		t.Errorf("NewInbox with zero loggers: problems %q, want %q (error: %v)", got, want, err)
	}
}

// Every problem of the list of databases is reported at once, named by
// its position, before any database is opened.
func TestDatabasesValidatedAsAWhole(t *testing.T) {
	ctx := context.Background()
	good := sqliteDatabases(t, 1)[0]
	dbs := []tenant.Database{good, {ID: "", Driver: "", DSN: ""}, {ID: good.ID, Driver: good.Driver, DSN: good.DSN + "-2"}}
	_, err := tenant.New(ctx, tenant.Config{Databases: dbs, Logger: quietLogger()})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New = %v", err)
	}
	want := []string{"Databases[1].DSN", "Databases[1].Driver", "Databases[1].ID", "Databases[2].ID"}
	if got := cfgpath.Fields(err); !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q (error: %v)", got, want, err)
	}
	_, err = tenant.NewInbox(ctx, tenant.InboxConfig{Databases: dbs, Logger: quietLogger()})
	if got := cfgpath.Fields(err); !slices.Equal(got, want) {
		t.Fatalf("NewInbox problems %q, want %q (error: %v)", got, want, err)
	}
	if _, err := os.Stat(good.DSN); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a database was opened although the list is invalid: %v", err)
	}
}

// Config.Now is the clock of every part: the stores' stored times, the
// dispatcher's leases and the poller's due times.
func TestOneClockForEveryTenantPart(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2100, 1, 2, 3, 4, 5, 0, time.UTC) // far from the real time
	o, err := tenant.New(ctx, tenant.Config{Databases: sqliteDatabases(t, 1), Logger: quietLogger(),
		Now: func() time.Time { return t0 }, Poller: poller.Config{Interval: 5 * time.Millisecond, SkipRecent: -1}})
	if err != nil {
		t.Fatal(err)
	}
	entered, release, delivered := make(chan struct{}, 1), make(chan struct{}), make(chan string, 2)
	o.RegisterFunc("Hot", func(_ context.Context, e core.Envelope) error {
		entered <- struct{}{}
		<-release
		delivered <- e.ID()
		return nil
	})
	o.RegisterFunc("Cold", func(_ context.Context, e core.Envelope) error { delivered <- e.ID(); return nil })
	if err := o.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}

	hot, _ := core.JSONEvent("Hot", `{}`)
	if err := tn.InTx(ctx, func(ctx context.Context) error { _, err := tn.Publish(ctx, hot); return err }); err != nil {
		t.Fatal(err)
	}
	waitOn(t, entered, "hot listener")
	rec, err := tn.Get(ctx, hot.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !rec.CreatedAt.Equal(t0) || !rec.LockedUntil.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("created_at %v, locked_until %v, want %v and 2 min later", rec.CreatedAt, rec.LockedUntil, t0)
	}
	close(release)
	waitOn(t, delivered, "hot delivery")

	// Inserted unowned and due at t0 (in 2100): only the shared clock makes
	// it due for the poller.
	cold, _ := core.JSONEvent("Cold", `{}`)
	tx, err := tn.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.PublishTx(ctx, tx, cold); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if id := waitOn(t, delivered, "poller delivery"); id != cold.ID() {
		t.Fatalf("delivered %s, want %s", id, cold.ID())
	}
	waitFor(t, "cold event DONE at t0", func() bool {
		rec, err := tn.Get(ctx, cold.ID())
		return err == nil && rec.Status == core.StatusDone && rec.DoneAt.Equal(t0)
	})
}

func waitOn[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// With Discover set, Databases is ignored as documented: not opened, and
// not validated either, so an invalid list fails neither New nor NewInbox.
func TestDatabasesIgnoredWithDiscover(t *testing.T) {
	ctx := context.Background()
	found := sqliteDatabases(t, 1)
	ignored := sqliteDatabases(t, 2)
	ignored = append(ignored, tenant.Database{ID: ignored[0].ID, Driver: "", DSN: ""}) // invalid: a duplicate id, no driver, no DSN
	discover := func(context.Context) ([]tenant.Database, error) { return found, nil }

	o, err := tenant.New(ctx, tenant.Config{Databases: ignored, Discover: discover, RefreshInterval: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("New with Discover and an invalid Databases = %v", err)
	}
	if got, want := o.StoreIDs(), ids(found); !slices.Equal(got, want) {
		t.Errorf("New: StoreIDs = %q, want the discovered %q", got, want)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ib, err := tenant.NewInbox(ctx, tenant.InboxConfig{Databases: ignored, Discover: discover, RefreshInterval: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("NewInbox with Discover and an invalid Databases = %v", err)
	}
	if got, want := ib.StoreIDs(), ids(found); !slices.Equal(got, want) {
		t.Errorf("NewInbox: StoreIDs = %q, want the discovered %q", got, want)
	}
	if err := ib.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range ignored[:2] {
		if _, err := os.Stat(d.DSN); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the ignored database %s was opened: %v", d.ID, err)
		}
	}
}
