package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
)

// newOutbox builds and starts a tenant.Outbox recording deliveries, closed
// when the test ends.
func newOutbox(t *testing.T, cfg tenant.Config) (*tenant.Outbox, *deliveries) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	o, err := tenant.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("tenant.New: %v", err)
	}
	del := newDeliveries()
	o.RegisterFunc("OrderPlaced", del.listener)
	if err := o.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return o, del
}

// waitAllDone waits until every row of the tenant's table is DONE and
// there are want rows.
func waitAllDone(t *testing.T, o *tenant.Outbox, id string, want int) map[string]row {
	t.Helper()
	tn, err := o.For(id)
	if err != nil {
		t.Fatal(err)
	}
	var rows map[string]row
	waitFor(t, fmt.Sprintf("%d DONE rows in %s", want, id), func() bool {
		rows = readRows(t, tn.DB())
		if len(rows) != want {
			return false
		}
		for _, r := range rows {
			if r.Status != core.StatusDone {
				return false
			}
		}
		return true
	})
	return rows
}

func TestEventsLandInTheirTenantsDatabase(t *testing.T) {
	for _, set := range databaseSets {
		t.Run(set.name, func(t *testing.T) {
			dbs := withOrders(t, set.make(t))
			o, del := newOutbox(t, tenant.Config{Databases: dbs,
				Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: -1}})
			if got := o.StoreIDs(); !slices.Equal(got, ids(dbs)) {
				t.Fatalf("StoreIDs = %v, want %v", got, ids(dbs))
			}
			const perTenant = 15
			published := map[string][]string{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, d := range dbs {
				wg.Go(func() {
					for range perTenant {
						id, err := publish(context.Background(), o, d.ID)
						if err != nil {
							t.Errorf("publish to %s: %v", d.ID, err)
							return
						}
						mu.Lock()
						published[d.ID] = append(published[d.ID], id)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for _, d := range dbs {
				rows := waitAllDone(t, o, d.ID, perTenant)
				for _, id := range published[d.ID] {
					r, ok := rows[id]
					if !ok || r.Tenant != d.ID {
						t.Errorf("event %s of %s: row %+v in its own database (present %v)", id, d.ID, r, ok)
					}
					if got := del.store(id); got != d.ID {
						t.Errorf("event %s of %s: tenant.StoreID of its listener's ctx = %q", id, d.ID, got)
					}
					if del.count(d.ID, id) < 1 {
						t.Errorf("event %s of %s never delivered", id, d.ID)
					}
				}
				for id, r := range rows {
					if r.Tenant != d.ID {
						t.Errorf("database %s holds event %s of tenant %s", d.ID, id, r.Tenant)
					}
				}
				// The business row committed with the event, in the same database.
				tn, _ := o.For(d.ID)
				var orders int
				if err := tn.DB().Get(&orders, `SELECT COUNT(*) FROM orders`); err != nil || orders != perTenant {
					t.Errorf("%s: %d orders (%v), want %d", d.ID, orders, err, perTenant)
				}
			}
		})
	}
}

func TestRollbackLeavesNothingInAnyDatabase(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 2))
	o, _ := newOutbox(t, tenant.Config{Databases: dbs})
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("business failure")
	err = tn.InTx(context.Background(), func(ctx context.Context) error {
		env, _ := core.NewEvent("OrderPlaced").TenantID("s1").PayloadJSONString(`{}`).Build()
		if _, err := tn.Publish(ctx, env); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want the business error", err)
	}
	for _, d := range dbs {
		if rows := readRows(t, openAgain(t, d)); len(rows) != 0 {
			t.Errorf("%s holds %d rows after a rollback", d.ID, len(rows))
		}
	}
	// Without a transaction in ctx nothing is written.
	env, _ := core.NewEvent("OrderPlaced").PayloadJSONString(`{}`).Build()
	if _, err := tn.Publish(context.Background(), env); !errors.Is(err, core.ErrNoTransaction) {
		t.Errorf("Publish without a transaction = %v, want ErrNoTransaction", err)
	}
}

func TestRouter(t *testing.T) {
	u := [16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}
	uuidID := "123e4567-e89b-12d3-a456-426614174000"
	if got := tenant.UUIDKey(u); got != uuidID {
		t.Fatalf("UUIDKey = %q, want %q", got, uuidID)
	}
	dbs := sqliteDatabases(t, 2)
	dbs[1].ID = uuidID
	o, _ := newOutbox(t, tenant.Config{Databases: dbs})

	tn, err := o.For("s1")
	if err != nil || tn.ID() != "s1" || tn.DB() == nil {
		t.Fatalf("For(s1) = %+v, %v", tn, err)
	}
	if again, _ := o.For("s1"); again != tn {
		t.Error("For must return the same tenant every time (cached)")
	}
	if tn, err := o.ForUUID(u); err != nil || tn.ID() != uuidID {
		t.Fatalf("ForUUID = %+v, %v", tn, err)
	}
	_, err = o.For("nobody")
	var unknown *tenant.UnknownKeyError
	if !errors.Is(err, tenant.ErrUnknownKey) || !errors.As(err, &unknown) || unknown.Key != "nobody" ||
		!strings.HasPrefix(err.Error(), "outbox: ") {
		t.Errorf("For(unknown) = %v, want *UnknownKeyError wrapping ErrUnknownKey", err)
	}
	if _, err := o.ForUUID([16]byte{}); !errors.Is(err, tenant.ErrUnknownKey) {
		t.Errorf("ForUUID(unknown) = %v", err)
	}
	if _, err := o.For(""); !errors.Is(err, tenant.ErrInvalidKey) {
		t.Errorf("For(\"\") = %v, want ErrInvalidKey", err)
	}
}

func TestRouteMapsKeysToStores(t *testing.T) {
	dbs := sqliteDatabases(t, 2)
	o, _ := newOutbox(t, tenant.Config{Databases: dbs, Route: func(key string) string {
		shard, _, _ := strings.Cut(key, ":") // "s2:customer-9" → store s2
		return shard
	}})
	if tn, err := o.For("s2:customer-9"); err != nil || tn.ID() != "s2" {
		t.Fatalf("For(s2:customer-9) = %+v, %v", tn, err)
	}
	_, err := o.For("s9:x")
	var unknown *tenant.UnknownKeyError
	if !errors.As(err, &unknown) || unknown.StoreID != "s9" || !strings.Contains(err.Error(), `(store "s9")`) {
		t.Errorf("For(s9:x) = %v", err)
	}
}

// insertUnowned stores n events for the tenant without publishing them
// (no hot path, no lease): only the poller can deliver them.
func insertUnowned(t *testing.T, d tenant.Database, n int) {
	t.Helper()
	db := openAgain(t, d)
	st, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range n {
		env, err := core.NewEvent("OrderPlaced").TenantID(d.ID).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Insert(context.Background(), db, env, core.Lease{}); err != nil {
			t.Fatal(err)
		}
	}
}

// openNotListening is tenant.Open with PostgreSQL pools of one connection,
// on which the outbox does not listen for notifications.
func openNotListening(ctx context.Context, d tenant.Database) (*sqlx.DB, error) {
	db, err := tenant.Open(ctx, d)
	if err == nil && d.Driver == "pgx" {
		db.SetMaxOpenConns(1)
	}
	return db, err
}

func TestSelectorsDrainEverythingInTheirOrder(t *testing.T) {
	const perStore, batch = 6, 3
	for _, set := range databaseSets {
		for _, sel := range []struct {
			name string
			sel  core.Selector
			want func(ids []string) string
		}{
			{"RoundRobin", core.RoundRobin{}, func(ids []string) string {
				// One batch from each store in turn, in id order.
				var runs []string
				for range perStore / batch {
					for _, id := range ids {
						runs = append(runs, fmt.Sprintf("%s×%d", id, batch))
					}
				}
				return strings.Join(runs, " ")
			}},
			{"DrainFirst", core.DrainFirst{}, func(ids []string) string {
				// Every event of a store before the next store's.
				var runs []string
				for _, id := range ids {
					runs = append(runs, fmt.Sprintf("%s×%d", id, perStore))
				}
				return strings.Join(runs, " ")
			}},
		} {
			t.Run(set.name+"/"+sel.name, func(t *testing.T) {
				dbs := set.make(t)
				for _, d := range dbs {
					insertUnowned(t, d, perStore)
				}
				// One worker: delivery order is the order the poller
				// claimed in (the cold queue is FIFO). PostgreSQL pools
				// of one connection do not listen for notifications,
				// whose wake-ups would poll their database out of the
				// Selector's turn.
				o, del := newOutbox(t, tenant.Config{Databases: dbs, Open: openNotListening,
					Dispatcher: dispatcher.Config{Workers: 1},
					Poller: poller.Config{Selector: sel.sel, BatchSize: batch, SkipRecent: -1,
						Interval: 50 * time.Millisecond}})
				for _, d := range dbs {
					waitAllDone(t, o, d.ID, perStore)
				}
				if got, want := del.runs(), sel.want(ids(dbs)); got != want {
					t.Fatalf("delivery order\n got %s\nwant %s", got, want)
				}
			})
		}
	}
}

// discovery is a Discovery over a list the test changes.
type discovery struct {
	mu    sync.Mutex
	dbs   []tenant.Database
	calls atomic.Int32
	err   error
}

func (d *discovery) set(dbs ...tenant.Database) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dbs = dbs
}

func (d *discovery) discover(context.Context) ([]tenant.Database, error) {
	d.calls.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.dbs), d.err
}

func TestDiscoveryAddsAndRemovesWhileEventsFlow(t *testing.T) {
	for _, set := range databaseSets {
		t.Run(set.name, func(t *testing.T) {
			all := withOrders(t, set.make(t)) // s1 s2 s3 [m1 m2]
			byID := map[string]tenant.Database{}
			for _, d := range all {
				byID[d.ID] = d
			}
			disc := &discovery{}
			disc.set(byID["s1"], byID["s2"])
			o, del := newOutbox(t, tenant.Config{Discover: disc.discover, RefreshInterval: -1,
				Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: -1}})

			// Publishers write to every routable database until stopped.
			var (
				mu        sync.Mutex
				published = map[string][]string{}
				stop      = make(chan struct{})
				wg        sync.WaitGroup
				unknown   atomic.Int32
			)
			for _, d := range all {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						id, err := publish(context.Background(), o, d.ID)
						switch {
						case errors.Is(err, tenant.ErrUnknownKey):
							unknown.Add(1)
							time.Sleep(time.Millisecond) // pacing only: not in the set right now
							continue
						case err != nil && id != "":
							// The tenant left the set between For and
							// commit: nothing committed, or the commit
							// failed on a closed pool. Either way no row.
							continue
						case err != nil:
							t.Errorf("publish to %s: %v", d.ID, err)
							return
						}
						mu.Lock()
						published[d.ID] = append(published[d.ID], id)
						mu.Unlock()
					}
				})
			}
			count := func(id string) int {
				mu.Lock()
				defer mu.Unlock()
				return len(published[id])
			}
			s2, _ := o.For("s2")
			waitFor(t, "events in s1 and s2", func() bool { return count("s1") > 10 && count("s2") > 10 })

			// Add the rest (s3 and the MariaDB databases), remove s1.
			rest := []tenant.Database{byID["s2"]}
			for _, d := range all {
				if d.ID != "s1" && d.ID != "s2" {
					rest = append(rest, d)
				}
			}
			disc.set(rest...)
			res, err := o.Refresh(context.Background())
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			wantAdded := ids(rest[1:])
			if !slices.Equal(res.Added, wantAdded) || !slices.Equal(res.Removed, []string{"s1"}) || res.Unchanged != 1 || len(res.Replaced)+len(res.Failed) != 0 {
				t.Fatalf("Refresh = %+v, want added %v, removed [s1], 1 unchanged", res, wantAdded)
			}
			if s2again, _ := o.For("s2"); s2again != s2 {
				t.Error("an unchanged database was recreated")
			}
			if _, err := o.For("s1"); !errors.Is(err, tenant.ErrUnknownKey) {
				t.Errorf("For(s1) after its removal = %v, want ErrUnknownKey", err)
			}
			for _, d := range rest {
				waitFor(t, "events in "+d.ID, func() bool { return count(d.ID) > 10 })
			}
			close(stop)
			wg.Wait()

			// Every event committed to a database still in the set is
			// delivered and DONE.
			for _, d := range rest {
				rows := waitAllDone(t, o, d.ID, count(d.ID))
				for _, id := range published[d.ID] {
					if rows[id].Tenant != d.ID || del.count(d.ID, id) < 1 {
						t.Fatalf("%s: event %s row %+v delivered %d times", d.ID, id, rows[id], del.count(d.ID, id))
					}
				}
			}
			// s1 was drained before it was closed: whatever it committed
			// is DONE, or still NEW when it committed after the removal;
			// those are delivered when s1 comes back.
			disc.set(append(rest, byID["s1"])...)
			if res, err := o.Refresh(context.Background()); err != nil || !slices.Equal(res.Added, []string{"s1"}) {
				t.Fatalf("Refresh (s1 back) = %+v, %v", res, err)
			}
			rows := waitAllDone(t, o, "s1", count("s1"))
			for _, id := range published["s1"] {
				if _, ok := rows[id]; !ok || del.count("s1", id) < 1 {
					t.Fatalf("s1: committed event %s lost (row present %v, delivered %d)", id, ok, del.count("s1", id))
				}
			}
			t.Logf("published %v events; %d publishes found their database absent",
				func() map[string]int {
					m := map[string]int{}
					for _, d := range all {
						m[d.ID] = count(d.ID)
					}
					return m
				}(), unknown.Load())
		})
	}
}

func TestPeriodicRefresh(t *testing.T) {
	dbs := sqliteDatabases(t, 3)
	disc := &discovery{}
	disc.set(dbs[0])
	o, _ := newOutbox(t, tenant.Config{Discover: disc.discover, RefreshInterval: 10 * time.Millisecond})
	disc.set(dbs[0], dbs[2])
	waitFor(t, "the refresh loop to add s3", func() bool { _, err := o.For("s3"); return err == nil })
	// A failing discovery keeps the current set.
	disc.mu.Lock()
	disc.err = errors.New("registry down")
	disc.mu.Unlock()
	calls := disc.calls.Load()
	waitFor(t, "two more discoveries", func() bool { return disc.calls.Load() >= calls+2 })
	if got := o.StoreIDs(); !slices.Equal(got, []string{"s1", "s3"}) {
		t.Errorf("after failing discoveries: %v, want [s1 s3]", got)
	}
}

func TestChangedDSNReplacesTheStore(t *testing.T) {
	dbs := sqliteDatabases(t, 2)
	o, _ := newOutbox(t, tenant.Config{Databases: dbs[:1]})
	before, _ := o.For("s1")
	moved := tenant.Database{ID: "s1", Driver: "sqlite3", DSN: dbs[1].DSN}
	res, err := o.SetDatabases(context.Background(), []tenant.Database{moved})
	if err != nil || !slices.Equal(res.Replaced, []string{"s1"}) {
		t.Fatalf("SetDatabases = %+v, %v; want s1 replaced", res, err)
	}
	after, _ := o.For("s1")
	if after == before {
		t.Fatal("a changed DSN must give a new store")
	}
	if err := before.DB().Ping(); err == nil {
		t.Error("the replaced database's pool must be closed")
	}
}

func TestBadConfigurationAndSets(t *testing.T) {
	ctx := context.Background()
	if _, err := tenant.New(ctx, tenant.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New without databases = %v", err)
	}
	dbs := sqliteDatabases(t, 1)
	bad := [][]tenant.Database{
		{{ID: "", Driver: "sqlite3", DSN: "x.db"}},
		{{ID: "a\tb", Driver: "sqlite3", DSN: "x.db"}},
		{{ID: "a", Driver: "", DSN: "x.db"}},
		{{ID: "a", Driver: "sqlite3", DSN: ""}},
		{dbs[0], dbs[0]},
	}
	for _, set := range bad {
		if _, err := tenant.New(ctx, tenant.Config{Databases: set, Logger: quietLogger()}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", set, err)
		}
	}
	if _, err := tenant.New(ctx, tenant.Config{Databases: dbs, Store: jdbcstore.Config{Table: "x; DROP"}}); !errors.Is(err, core.ErrInvalidIdentifier) {
		t.Errorf("bad table = %v, want ErrInvalidIdentifier", err)
	}
	if _, err := tenant.New(ctx, tenant.Config{Databases: dbs, DrainTimeout: -1}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("negative DrainTimeout = %v", err)
	}
	// An unreachable database fails New, with no password in the error;
	// the log line says so (not that it waits for a refresh).
	unreachable := tenant.Database{ID: "m", Driver: "mysql", DSN: "u:s3cret@tcp(127.0.0.1:1)/x?timeout=1s"}
	newLogs := &testsupport.LogBuffer{}
	_, err := tenant.New(ctx, tenant.Config{Databases: []tenant.Database{unreachable}, Logger: slog.New(slog.NewTextHandler(newLogs, nil))})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), `"m"`) {
		t.Errorf("unreachable database: %v", err)
	}
	if l := newLogs.String(); !strings.Contains(l, "New fails") || strings.Contains(l, "next refresh") {
		t.Errorf("logs of New with an unreachable database: %s", l)
	}
	// A discovery error fails New.
	if _, err := tenant.New(ctx, tenant.Config{Discover: func(context.Context) ([]tenant.Database, error) {
		return nil, errors.New("registry down")
	}}); err == nil || !strings.Contains(err.Error(), "registry down") {
		t.Errorf("failing discovery: %v", err)
	}

	o, _ := newOutbox(t, tenant.Config{Databases: dbs})
	// An invalid set changes nothing.
	if _, err := o.SetDatabases(ctx, bad[4]); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("SetDatabases(duplicate) = %v", err)
	}
	if _, err := o.For("s1"); err != nil {
		t.Errorf("s1 gone after an invalid set: %v", err)
	}
	// Refresh without Discover.
	if _, err := o.Refresh(ctx); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("Refresh without Discover = %v", err)
	}
	// A database that cannot be opened is left out; the rest applies.
	logs := &testsupport.LogBuffer{}
	o2, err := tenant.New(ctx, tenant.Config{Databases: []tenant.Database{}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close(ctx)
	res, err := o2.SetDatabases(ctx, []tenant.Database{dbs[0], unreachable})
	// Added names what is served: not m.
	if err == nil || !slices.Equal(res.Failed, []string{"m"}) || !slices.Equal(res.Added, []string{"s1"}) {
		t.Errorf("SetDatabases with an unreachable one = %+v, %v", res, err)
	}
	if got := o2.StoreIDs(); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("StoreIDs = %v, want [s1]", got)
	}
	// A changed database that cannot be opened again is not served, and not
	// named Replaced either.
	changed := unreachable
	changed.ID = "s1"
	res, err = o2.SetDatabases(ctx, []tenant.Database{changed})
	if err == nil || !slices.Equal(res.Failed, []string{"s1"}) || len(res.Replaced)+len(res.Added) != 0 {
		t.Errorf("SetDatabases with s1 changed to an unreachable one = %+v, %v", res, err)
	}
	if got := o2.StoreIDs(); len(got) != 0 {
		t.Errorf("StoreIDs = %v, want none", got)
	}
	if !strings.Contains(logs.String(), "store=m") || !strings.Contains(logs.String(), "left out until the next refresh") || strings.Contains(logs.String(), "s3cret") {
		t.Errorf("logs: %s", logs.String())
	}
}

func TestStoreIDInLogsAndMetrics(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 2))
	logs := &testsupport.LogBuffer{}
	metrics := &testsupport.StoreMetrics{}
	o, err := tenant.New(context.Background(), tenant.Config{Databases: dbs, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	var failed atomic.Bool
	o.RegisterFunc("OrderPlaced", func(_ context.Context, env core.Envelope) error {
		if env.TenantID() == "s2" && failed.CompareAndSwap(false, true) {
			return errors.New("first try fails")
		}
		return nil
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2"} {
		if _, err := publish(context.Background(), o, id); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "per-store metrics", func() bool {
		return metrics.For("s1").Success.Load() == 1 && metrics.For("s2").Success.Load() == 1 && metrics.For("s2").Failure.Load() == 1
	})
	if metrics.For("s1").Failure.Load() != 0 {
		t.Errorf("metrics of s1: %v", metrics.For("s1"))
	}
	waitFor(t, "the retry log line", func() bool { return strings.Contains(logs.String(), "will retry") })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "will retry") && !strings.Contains(line, "store=s2") {
			t.Errorf("log line about s2's event without its store id: %s", line)
		}
	}
}

func TestRemovalWaitsForEventsInFlight(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 2))
	o, err := tenant.New(context.Background(), tenant.Config{Databases: dbs, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	started := make(chan string, 4)
	release := make(chan struct{})
	o.RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		started <- env.ID()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id, err := publish(context.Background(), o, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != id {
		t.Fatalf("listener got %s, want %s", got, id)
	}
	removed := make(chan error, 1)
	go func() {
		_, err := o.SetDatabases(context.Background(), dbs[1:])
		removed <- err
	}()
	waitFor(t, "s1 to stop being routed to", func() bool {
		_, err := o.For("s1")
		return errors.Is(err, tenant.ErrUnknownKey)
	})
	select {
	case err := <-removed:
		t.Fatalf("removal returned (%v) while s1's event was still in its listener", err)
	case <-time.After(30 * time.Millisecond): // a negative check: it must still wait
	}
	close(release)
	if err := <-removed; err != nil {
		t.Fatalf("SetDatabases: %v", err)
	}
	// The outcome was written before s1 was closed.
	if r := readRows(t, openAgain(t, dbs[0]))[id]; r.Status != core.StatusDone {
		t.Fatalf("s1's event in flight ended %v, want DONE", r.Status)
	}
}

func TestRemovalPastDrainTimeoutLeavesTheEventForLater(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 2))
	o, err := tenant.New(context.Background(), tenant.Config{Databases: dbs, Logger: quietLogger(),
		DrainTimeout: 20 * time.Millisecond, Poller: poller.Config{Interval: 20 * time.Millisecond, SkipRecent: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	var stuck atomic.Bool
	stuck.Store(true)
	started := make(chan struct{}, 1)
	o.RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		if stuck.Load() {
			started <- struct{}{}
			<-ctx.Done() // until shutdown: the drain gives up first
			return ctx.Err()
		}
		return nil
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id, err := publish(context.Background(), o, "s1")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := o.SetDatabases(context.Background(), dbs[1:]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SetDatabases past DrainTimeout = %v, want DeadlineExceeded", err)
	}
	if r := readRows(t, openAgain(t, dbs[0]))[id]; r.Status != core.StatusNew {
		t.Fatalf("event of the removed database: %v, want still NEW (delivered when it returns)", r.Status)
	}
	// Back in the set: this node still owns the row and its poller
	// delivers it.
	stuck.Store(false)
	if _, err := o.SetDatabases(context.Background(), dbs); err != nil {
		t.Fatalf("SetDatabases (s1 back): %v", err)
	}
	waitAllDone(t, o, "s1", 1)
}

// Close whose ctx expires while a listener runs returns then, but leaves
// that listener its database: once it returns, its DONE is written (and
// its lease handed back) before the database is closed, as the root
// outbox does. A second Close waits for the databases to be closed.
func TestCloseExpiredLetsARunningListenerFinish(t *testing.T) {
	dbs := sqliteDatabases(t, 1)
	lg, logs := testsupport.NewLogger()
	o, err := tenant.New(context.Background(), tenant.Config{Databases: dbs, Logger: lg,
		Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: -1}})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	started := make(chan string, 1)
	o.RegisterFunc("Slow", func(_ context.Context, env core.Envelope) error {
		started <- env.ID()
		<-release // deaf to ctx, as a listener stuck in a call may be
		return nil
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.JSONEvent("Slow", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.InTx(context.Background(), func(ctx context.Context) error {
		_, err := tn.Publish(ctx, env)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("the listener was not called")
	}

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		closed <- o.Close(ctx)
	}()
	select {
	case err := <-closed:
		if err != context.DeadlineExceeded { // itself, not joined with nils
			t.Errorf("Close with the listener running = %#v, want context.DeadlineExceeded", err)
		}
	case <-time.After(waitTimeout):
		close(release)
		t.Fatal("Close did not return when its ctx expired")
	}
	close(release)

	db := openAgain(t, dbs[0])
	waitFor(t, "the event DONE, its lease released", func() bool {
		var status core.Status
		var lockedBy string
		if err := db.QueryRow(`SELECT status, COALESCE(locked_by, '') FROM `+jdbcstore.DefaultTable+` WHERE event_id = ?`,
			env.ID()).Scan(&status, &lockedBy); err != nil {
			t.Fatal(err)
		}
		return status == core.StatusDone && lockedBy == ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := o.Close(ctx); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if lines := logs.Lines("database is closed"); len(lines) > 0 {
		t.Errorf("the database was closed under the listener: %q", lines)
	}
	if _, err := o.For("s1"); !errors.Is(err, tenant.ErrUnknownKey) || !errors.Is(err, core.ErrClosed) {
		t.Errorf("For after Close = %v, want ErrUnknownKey and core.ErrClosed", err)
	}
}
