package outbox_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/retry"
)

func tableExists(t *testing.T, ctx context.Context, db interface {
	GetContext(ctx context.Context, dest any, q string, args ...any) error
}) bool {
	t.Helper()
	var n int
	if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM sqlite_master WHERE name = ?`, jdbcstore.DefaultTable); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// New checks the whole Config before it touches the database, and reports
// every problem at once, each named by its path.
func TestNewReportsEveryProblemBeforeTheSchema(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "fresh.db")
	cfg := outbox.Config{}
	cfg.Dispatcher.Workers = -1
	cfg.Poller.BatchSize = -5
	cfg.Store.MaxErrorLen = -1
	_, err := outbox.New(ctx, db, cfg)
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	var ce *core.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New = %v, want a *core.ConfigError", err)
	}
	got := cfgpath.Fields(err)
	if want := []string{"Dispatcher.Workers", "Poller.BatchSize", "Store.MaxErrorLen"}; !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q (error: %v)", got, want, err)
	}
	for _, ce := range cfgpath.All(err) {
		if !errors.Is(ce, core.ErrInvalidConfig) {
			t.Errorf("%s does not wrap ErrInvalidConfig", ce.Field)
		}
	}
	if tableExists(t, ctx, db) {
		t.Fatal("New applied the schema although the Config is invalid")
	}
}

func TestNewConfigPaths(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "paths.db")
	cases := map[string]struct {
		tweak func(*outbox.Config)
		want  []string
		is    error
	}{
		"table": {func(c *outbox.Config) { c.Store.Table = "bad;name" }, []string{"Store.Table"}, core.ErrInvalidIdentifier},
		"cleanup": {func(c *outbox.Config) { c.EnableCleanup = true; c.Cleanup.BatchSize = -1 },
			[]string{"Cleanup.BatchSize"}, core.ErrInvalidConfig},
		"cleanup off": {func(c *outbox.Config) { c.Cleanup.BatchSize = -1; c.Poller.BatchSize = -1 },
			[]string{"Poller.BatchSize"}, core.ErrInvalidConfig},
		"poller off": {func(c *outbox.Config) {
			c.DisablePoller = true
			c.Poller.BatchSize = -1
			c.Dispatcher.Lease = time.Second
		},
			[]string{"Dispatcher.Lease"}, core.ErrInvalidConfig},
		"part clocks": {func(c *outbox.Config) {
			c.Store.Now, c.Dispatcher.Now, c.Poller.Now = time.Now, time.Now, time.Now
		}, []string{"Dispatcher.Now", "Poller.Now", "Store.Now"}, core.ErrInvalidConfig},
		// The poller's Config is not checked when it is disabled, its clock
		// included.
		"poller off, its clock set": {func(c *outbox.Config) {
			c.DisablePoller = true
			c.Poller.Now = time.Now
			c.Dispatcher.Workers = -1
		}, []string{"Dispatcher.Workers"}, core.ErrInvalidConfig},
		// A retry.Exponential literal is validated as NewExponential
		// validates it (a negative MaxDelay used the attempts up at once).
		"retry literal": {func(c *outbox.Config) {
			c.Dispatcher.Retry = retry.Exponential{MaxDelay: -time.Second}
		}, []string{"Dispatcher.Retry.MaxDelay"}, core.ErrInvalidConfig},
		"retry literal upside down": {func(c *outbox.Config) {
			c.Dispatcher.Retry = &retry.Exponential{BaseDelay: time.Hour, MaxDelay: time.Millisecond}
		}, []string{"Dispatcher.Retry.MaxDelay"}, core.ErrInvalidConfig},
		// A logger without a handler (the zero slog.Logger) panicked at
		// its first line, in New or in a background goroutine.
		"loggers without a handler": {func(c *outbox.Config) {
			c.Logger, c.Store.Logger, c.Dispatcher.Logger = new(slog.Logger), new(slog.Logger), new(slog.Logger)
			c.Poller.Logger, c.Cleanup.Logger, c.EnableCleanup = new(slog.Logger), new(slog.Logger), true
		}, []string{"Cleanup.Logger", "Dispatcher.Logger", "Logger", "Poller.Logger", "Store.Logger"}, core.ErrInvalidConfig},
		// A duration given without its unit (5 is 5 ns) made every status
		// write fail (every event delivered again and again) or a loop
		// spin on an idle table; 1 ms is the least taken. A negative
		// ReapInterval still disables reaping.
		"durations without a unit": {func(c *outbox.Config) {
			c.Dispatcher.StatusTimeout, c.Dispatcher.ListenerTimeout, c.Dispatcher.InFlightTTL = 5, 30, 60
			c.Dispatcher.UnhandledDelay = time.Microsecond
			c.Poller.Interval, c.Poller.BacklogInterval, c.Poller.QueryTimeout, c.Poller.ReapInterval = 5, 1, 30, 30
			c.EnableCleanup, c.Cleanup.Interval = true, 3600
		}, []string{"Cleanup.Interval", "Dispatcher.InFlightTTL", "Dispatcher.ListenerTimeout", "Dispatcher.StatusTimeout",
			"Dispatcher.UnhandledDelay", "Poller.BacklogInterval", "Poller.Interval", "Poller.QueryTimeout", "Poller.ReapInterval"}, core.ErrInvalidConfig},
		"shortest durations": {func(c *outbox.Config) {
			c.Dispatcher.StatusTimeout, c.Dispatcher.ListenerTimeout, c.Dispatcher.Lease = time.Millisecond, time.Millisecond, time.Hour
			c.Poller.Interval, c.Poller.ReapInterval = time.Millisecond, -1
			c.Dispatcher.Workers = -1 // so that New fails before the schema
		}, []string{"Dispatcher.Workers"}, core.ErrInvalidConfig},
		// The parts inherit Logger: it is reported once, as Logger (it was
		// also reported as Store.Logger, a field not set).
		"Logger alone without a handler": {func(c *outbox.Config) { c.Logger = new(slog.Logger) },
			[]string{"Logger"}, core.ErrInvalidConfig},
	}
	for name, tc := range cases {
		var cfg outbox.Config
		tc.tweak(&cfg)
		_, err := outbox.New(ctx, db, cfg)
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: New = %v, want %v", name, err, tc.is)
		}
		if got := cfgpath.Fields(err); !slices.Equal(got, tc.want) {
			t.Errorf("%s: problems %q, want %q (error: %v)", name, got, tc.want, err)
		}
	}
	if tableExists(t, ctx, db) {
		t.Fatal("New applied the schema although the Config is invalid")
	}
}

// noDialectDriver is a database/sql driver no dialect serves (lib/pq, say).
type noDialectDriver struct{}

func (noDialectDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no server") }

func init() { sql.Register("outbox_test_nodialect", noDialectDriver{}) }

// A handle whose driver has no registered dialect is an invalid
// Store.Dialect, which also wraps jdbcstore.ErrUnsupportedDriver.
func TestNewUndetectedDriver(t *testing.T) {
	ctx := context.Background()
	db, err := sqlx.Open("outbox_test_nodialect", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	_, err = outbox.New(ctx, db, outbox.Config{})
	if !errors.Is(err, core.ErrInvalidConfig) || !errors.Is(err, jdbcstore.ErrUnsupportedDriver) {
		t.Fatalf("New = %v, want ErrInvalidConfig and ErrUnsupportedDriver", err)
	}
	if got, want := cfgpath.Fields(err), []string{"Store.Dialect"}; !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q (error: %v)", got, want, err)
	}
	// With other problems, every one is reported at once: the dialect
	// used to be checked only once the store's fields were valid.
	_, err = outbox.New(ctx, db, outbox.Config{Store: jdbcstore.Config{Table: "bad-name"}, Dispatcher: dispatcher.Config{Workers: -1}})
	got := cfgpath.Fields(err)
	slices.Sort(got)
	if want := []string{"Dispatcher.Workers", "Store.Dialect", "Store.Table"}; !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q (error: %v)", got, want, err)
	}
}

// waitRecord waits until ok accepts the row of id, up to a deadline.
func waitRecord(t *testing.T, ob *outbox.Outbox, id string, what string, ok func(core.Record) bool) core.Record {
	t.Helper()
	var rec core.Record
	testsupport.WaitFor(t, 10*time.Second, what, func() bool {
		var err error
		rec, err = ob.Get(context.Background(), id)
		return err == nil && ok(rec)
	})
	return rec
}

// Config.Now is the clock of every part: the store's stored times, the
// dispatcher's leases and the poller's due times.
func TestOneClockForEveryPart(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "clock.db")
	t0 := time.Date(2100, 1, 2, 3, 4, 5, 0, time.UTC) // far from the real time
	ob, err := outbox.New(ctx, db, outbox.Config{
		Now:    func() time.Time { return t0 },
		Poller: pollerFast(),
		Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	entered, release, delivered := make(chan struct{}, 1), make(chan struct{}), make(chan string, 2)
	ob.RegisterFunc("Hot", func(_ context.Context, e outbox.Envelope) error {
		entered <- struct{}{}
		<-release
		delivered <- e.ID()
		return nil
	})
	ob.RegisterFunc("Cold", func(_ context.Context, e outbox.Envelope) error {
		delivered <- e.ID()
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })

	// The hot path: the dispatcher's lease is taken on the shared clock.
	hot, _ := outbox.JSONEvent("Hot", `{}`)
	if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, hot); return err }); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, entered, "hot listener")
	rec, err := ob.Get(ctx, hot.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !rec.CreatedAt.Equal(t0) || !rec.AvailableAt.Equal(t0) {
		t.Errorf("store clock: created_at %v, available_at %v, want %v", rec.CreatedAt, rec.AvailableAt, t0)
	}
	if want := t0.Add(2 * time.Minute); !rec.LockedUntil.Equal(want) {
		t.Errorf("dispatcher clock: locked_until %v, want %v", rec.LockedUntil, want)
	}
	close(release)
	waitSignal(t, delivered, "hot delivery")
	rec = waitRecord(t, ob, hot.ID(), "hot event DONE", func(r core.Record) bool { return r.Status == core.StatusDone })
	if !rec.DoneAt.Equal(t0) {
		t.Errorf("store clock: done_at %v, want %v", rec.DoneAt, t0)
	}

	// The poller: an unowned row due at t0 (in 2100) is only due on the
	// shared clock.
	cold, _ := outbox.JSONEvent("Cold", `{}`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.PublishTx(ctx, tx, cold); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if id := waitSignal(t, delivered, "poller delivery"); id != cold.ID() {
		t.Fatalf("delivered %s, want %s", id, cold.ID())
	}
}

// An invalid Ordering is reported under "Ordering." with the sentinel an
// envelope would fail with: errors.Is matches core.ErrInvalidDeadPolicy,
// as the README promises, not ErrInvalidConfig only.
func TestNewOrderingErrorsWrapSentinels(t *testing.T) {
	db := sqliteDB(t, "ordering.db")
	_, err := outbox.New(context.Background(), db, outbox.Config{
		Ordering: core.Ordering{Types: []string{strings.Repeat("t", core.MaxEventTypeLen+1)}, OnDead: 5}})
	if got, want := cfgpath.Fields(err), []string{"Ordering.OnDead", "Ordering.Types[0]"}; !slices.Equal(got, want) {
		t.Fatalf("New = %v: fields %q, want %q", err, got, want)
	}
	for _, want := range []error{core.ErrInvalidConfig, core.ErrInvalidDeadPolicy, core.ErrEventTypeTooLong} {
		if !errors.Is(err, want) {
			t.Errorf("New = %v, want it to match %v", err, want)
		}
	}
}

// nilMetrics and nilObserver implement their interfaces on a pointer
// whose nil value panics at the first call.
type nilMetrics struct {
	core.NopMetrics
	n int
}

func (m *nilMetrics) QueueDepths(hot, cold int) { m.n = hot + cold }

type nilObserver struct {
	core.NopObserver
	n int
}

func (o *nilObserver) Publish(context.Context, core.Envelope) (map[string]string, func(error)) {
	o.n++
	return nil, func(error) {}
}

// A nil value of the Metrics or Observer interface type is refused by New
// with a *core.ConfigError naming the field, before the schema: it used
// to pass, and the first poll or delivery panicked in a background
// goroutine.
func TestNewRefusesTypedNilMetricsAndObserver(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "typednil.db")
	_, err := outbox.New(ctx, db, outbox.Config{Metrics: (*nilMetrics)(nil), Observer: (*nilObserver)(nil)})
	if got, want := cfgpath.Fields(err), []string{"Metrics", "Observer"}; !slices.Equal(got, want) {
		t.Fatalf("New = %v: fields %q, want %q", err, got, want)
	}
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New = %v, want ErrInvalidConfig", err)
	}
	if tableExists(t, ctx, db) {
		t.Error("New applied the schema although the Config is invalid")
	}
	// Non-nil values of those types are fine.
	if _, err := outbox.New(ctx, db, outbox.Config{Metrics: &nilMetrics{}, Observer: &nilObserver{}, Logger: quietLogger()}); err != nil {
		t.Errorf("New with non-nil Metrics and Observer = %v", err)
	}
}

// New reports a handle without a database as the field "db", whatever
// its type: a nil *sql.DB or *sqlx.DB, and an *sqlx.DB holding a nil
// *sql.DB (which panicked in the store's dialect detection or in
// database/sql).
func TestNewRefusesAHandleWithoutDatabase(t *testing.T) {
	ctx := context.Background()
	check := func(name string, err error) {
		t.Helper()
		if got := cfgpath.Fields(err); !slices.Equal(got, []string{"db"}) || !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("New(%s) = %v (fields %q), want a ConfigError for db", name, err, got)
		}
	}
	_, err := outbox.New(ctx, (*sql.DB)(nil), outbox.Config{})
	check("(*sql.DB)(nil)", err)
	_, err = outbox.New(ctx, (*sqlx.DB)(nil), outbox.Config{})
	check("(*sqlx.DB)(nil)", err)
	_, err = outbox.New(ctx, &sqlx.DB{}, outbox.Config{})
	check("&sqlx.DB{}", err)
	for _, name := range []string{"sqlite3", "mysql", "pgx"} {
		_, err = outbox.New(ctx, sqlx.NewDb(nil, name), outbox.Config{})
		check(fmt.Sprintf("sqlx.NewDb(nil, %q)", name), err)
	}
}

// sqliteAlias is a name database/sql has SQLite's driver registered
// under, with a dialect of its own: a third-party dialect over a known
// driver, which is no mismatch.
const sqliteAlias = "outbox_test_sqlite_alias"

type aliasDialect struct{ jdbcstore.Dialect }

func (aliasDialect) DriverNames() []string { return []string{sqliteAlias} }

func init() {
	sql.Register(sqliteAlias, &sqlite3.SQLiteDriver{})
	jdbcstore.Register(aliasDialect{sqlite.Dialect})
}

// A handle named after another database's driver than its own, such as
// sqlx.NewDb(sqliteDB, "mysql"), is refused by New as an invalid
// Store.Dialect naming both dialects, before the schema: it failed later
// with SQLite's "near "KEY": syntax error". A name without a dialect
// ("postgres" over pgx), one registered for the handle's driver and an
// explicit Store.Dialect are left alone.
func TestNewRefusesADriverNameOfAnotherDatabase(t *testing.T) {
	ctx := context.Background()
	lite := sqliteDB(t, "mismatch.db")
	my, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/none") // never connected
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = my.Close() })
	for _, tc := range []struct {
		db          *sqlx.DB
		named, want string
	}{
		{sqlx.NewDb(lite.DB, "mysql"), "mysql", "sqlite"},
		{sqlx.NewDb(lite.DB, "pgx"), "postgres", "sqlite"},
		{sqlx.NewDb(my, "sqlite3"), "sqlite", "mysql"},
	} {
		_, err := outbox.New(ctx, tc.db, outbox.Config{Store: jdbcstore.Config{Table: "bad-name"}})
		if got := cfgpath.Fields(err); !slices.Equal(got, []string{"Store.Dialect", "Store.Table"}) {
			t.Errorf("New on a %T named %q = %v (fields %q), want Store.Dialect and Store.Table", tc.db.Driver(), tc.db.DriverName(), err, got)
			continue
		}
		msg := cfgpath.All(err)[0].Error()
		if !strings.Contains(msg, "dialect "+tc.named) || !strings.Contains(msg, "dialect "+tc.want) {
			t.Errorf("New on a %T named %q = %q, want it to name dialects %s and %s", tc.db.Driver(), tc.db.DriverName(), msg, tc.named, tc.want)
		}
	}
	if tableExists(t, ctx, lite) {
		t.Fatal("New applied the schema on a handle of another database's name")
	}
	for _, tc := range []struct {
		name string
		db   *sqlx.DB
		cfg  outbox.Config
	}{
		{"a name registered for the driver", sqlx.NewDb(lite.DB, sqliteAlias), outbox.Config{}},
		{"an explicit Store.Dialect", sqlx.NewDb(lite.DB, "mysql"),
			outbox.Config{Store: jdbcstore.Config{Dialect: sqlite.Dialect, Table: "explicit"}}},
	} {
		tc.cfg.Logger = quietLogger()
		if _, err := outbox.New(ctx, tc.db, tc.cfg); err != nil {
			t.Errorf("%s: New = %v", tc.name, err)
		}
	}
}

// Store.Table naming one of the application's tables by mistake is
// refused as that field, and the table is left as it was (the upgrade of
// an earlier release's outbox table added the ordering columns to it).
func TestNewRefusesATableThatIsNotAnOutbox(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "foreign.db")
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (ref TEXT PRIMARY KEY, amount INTEGER)`); err != nil {
		t.Fatal(err)
	}
	_, err := outbox.New(ctx, db, outbox.Config{Store: jdbcstore.Config{Table: "orders"}, Logger: quietLogger()})
	if got, want := cfgpath.Fields(err), []string{"Store.Table"}; !slices.Equal(got, want) || !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New on the table orders = %v: fields %q, want %q", err, got, want)
	}
	var cols int
	if err := db.GetContext(ctx, &cols, `SELECT COUNT(*) FROM pragma_table_info('orders')`); err != nil || cols != 2 {
		t.Errorf("orders has %d columns (%v), want its 2", cols, err)
	}
}
