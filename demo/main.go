// Command demo walks through the outbox on an embedded SQLite database (no
// server), on MySQL/MariaDB or on PostgreSQL: commit → hot path → DONE,
// rollback → no row, hot-queue overflow → poller, failing listener → RETRY
// → DEAD, a wildcard listener, and an inbox consumer.
//
//	go run ./demo            # temporary database, removed at exit
//	go run ./demo -keep f.db # keep the database file for inspection (a new file)
//	go run ./demo -mysql 'root@tcp(127.0.0.1:3306)/test?parseTime=true'
//	go run ./demo -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// On a server the demo drops and recreates its own tables
// (outbox_event_demo, orders_demo, inbox_demo, emails_demo) in the DSN's
// database (on PostgreSQL: the first schema of its search_path), and leaves
// them for inspection.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"

	// The MySQL/MariaDB dialect, registered for the driver "mysql".
	_ "github.com/outbox-go/outbox/jdbcstore/mysql"
	// The PostgreSQL dialect and the pgx driver, registered as "pgx".
	_ "github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/retry"
	"github.com/outbox-go/outbox/txctx"
)

func main() {
	keep := flag.String("keep", "", "keep the SQLite database at this new path (default: a temporary file, removed at exit); an existing file is refused")
	mysqlDSN := flag.String("mysql", "", "run on MySQL/MariaDB instead: a go-sql-driver/mysql DSN naming a database, e.g. 'root@tcp(127.0.0.1:3306)/test?parseTime=true'")
	pgDSN := flag.String("postgres", "", "run on PostgreSQL instead: a pgx DSN, e.g. 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'")
	verbose := flag.Bool("v", false, "show the framework's own log lines")
	flag.Parse()
	if flag.NArg() > 0 {
		// "go run ./demo f.db" would otherwise run on a temporary file and
		// remove it, and ignore any flag after the argument.
		fmt.Fprintf(os.Stderr, "demo: unexpected argument %q (a SQLite file to keep goes after -keep)\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	// An interrupt (SIGINT, SIGTERM) ends the walkthrough through its ctx,
	// so that its deferred cleanup runs: the temporary database is
	// removed (the signal's default action left it behind).
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, 15*time.Second)
	defer cancel()
	var err error
	switch {
	case *mysqlDSN != "" && *pgDSN != "":
		err = errors.New("-mysql and -postgres: choose one")
	case (*mysqlDSN != "" || *pgDSN != "") && *keep != "":
		err = errors.New("-keep is for SQLite; on a server the tables stay in the database")
	case *mysqlDSN != "":
		err = runServer(ctx, os.Stdout, mysqlServer, *mysqlDSN, *verbose)
	case *pgDSN != "":
		err = runServer(ctx, os.Stdout, postgresServer, *pgDSN, *verbose)
	default:
		err = run(ctx, os.Stdout, *keep, *verbose)
	}
	if sctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "demo: interrupted")
		cancel()
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// demo holds the walkthrough's state.
type demo struct {
	out         io.Writer
	ob          *outbox.Outbox
	insertOrder string // the INSERT of a business row, in the database's placeholders

	gate     chan struct{} // holds the "Slow" listener while open
	slowIn   chan string
	wildcard atomic.Int64
	mu       sync.Mutex
	seen     []string
	calledAt map[string]time.Time // first call of the OrderPlaced listener per event id; guarded by mu

	flushWindow time.Duration // the dispatcher's DoneFlushWindow
}

// Names of the tables of the demo on a server, dropped and recreated at
// every run.
const (
	serverOutboxTable = "outbox_event_demo"
	serverOrdersTable = "orders_demo"
)

// run walks through the demo on the SQLite file keep, or on a temporary
// file when keep is empty.
func run(ctx context.Context, out io.Writer, keep string, verbose bool) error {
	path := keep
	if path == "" {
		dir, err := os.MkdirTemp("", "outbox-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "demo.db")
	}
	if keep != "" {
		// The walkthrough's figures (9 DONE, 1 DEAD) are those of a new
		// database: on an earlier run's file they would add up.
		if _, err := os.Lstat(keep); err == nil {
			return fmt.Errorf("-keep %s: the file exists; the demo starts on a new one (remove it or choose another path)", keep)
		}
	}
	db, err := sqlite.Open(path)
	if err == nil {
		defer db.Close()
		// The first statement opens the file.
		_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`)
	}
	if err != nil {
		if keep != "" {
			return fmt.Errorf("-keep %s: %w", keep, err)
		}
		return err
	}
	return walk(ctx, out, db, fmt.Sprintf("SQLite (%s)", path), "orders", outbox.Config{}, verbose)
}

// server is what the demo needs to know about a database server.
type server struct {
	flag   string // the command-line flag, for errors
	name   string // for the output
	driver string // the database/sql driver
	// info returns the server's version, the current database and the
	// schema unqualified tables are created in (MySQL: the database;
	// PostgreSQL: the first existing schema of the search path, NULL
	// when there is none).
	info string
	// orders creates the business table orders_demo.
	orders string
	// quote quotes an identifier.
	quote func(string) string
}

var (
	mysqlServer = server{flag: "-mysql", name: "MySQL/MariaDB", driver: "mysql",
		info:   "SELECT VERSION(), DATABASE(), DATABASE()",
		orders: "CREATE TABLE `" + serverOrdersTable + "` (id BIGINT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(64) NOT NULL) ENGINE=InnoDB",
		quote:  func(s string) string { return "`" + s + "`" }}
	postgresServer = server{flag: "-postgres", name: "PostgreSQL", driver: "pgx",
		info:   "SELECT current_setting('server_version'), current_database(), current_schema()",
		orders: `CREATE TABLE "` + serverOrdersTable + `" (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, item VARCHAR(64) NOT NULL)`,
		quote:  func(s string) string { return `"` + s + `"` }}
)

// runServer walks through the demo on the database of dsn on srv, in
// fresh tables outbox_event_demo and orders_demo (and the inbox step's).
func runServer(ctx context.Context, out io.Writer, srv server, dsn string, verbose bool) error {
	db, err := sqlx.Open(srv.driver, dsn)
	if err != nil {
		return fmt.Errorf("%s: %w", srv.flag, err)
	}
	defer db.Close()
	var version string
	var database, schema sql.NullString
	if err := db.QueryRowContext(ctx, srv.info).Scan(&version, &database, &schema); err != nil {
		return fmt.Errorf("%s: %w", srv.flag, err)
	}
	if !database.Valid {
		return fmt.Errorf("%s: the DSN must name a database", srv.flag)
	}
	if !schema.Valid {
		return fmt.Errorf("%s: no schema of the search path exists to create the demo's tables in", srv.flag)
	}
	var tables []string
	// The outbox schema also creates the table of ordering keys
	// ("<table>_keys") on MySQL/MariaDB and PostgreSQL. Each is dropped
	// where the demo creates it, never a same-named table of another
	// schema that PostgreSQL's search path would find first.
	for _, t := range []string{serverOutboxTable, serverOutboxTable + "_keys", serverOrdersTable, demoInboxTable, demoEmailsTable} {
		tables = append(tables, srv.quote(schema.String)+"."+srv.quote(t))
	}
	for _, stmt := range []string{"DROP TABLE IF EXISTS " + strings.Join(tables, ", "), srv.orders} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	cfg := outbox.Config{}
	cfg.Store.Table = serverOutboxTable
	label := fmt.Sprintf("%s %s (database %s, tables %s and %s)", srv.name, version, database.String, serverOutboxTable, serverOrdersTable)
	if err := walk(ctx, out, db, label, serverOrdersTable, cfg, verbose); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe rows stay in table %s of database %s: SELECT status, COUNT(*) FROM %s GROUP BY status\n",
		serverOutboxTable, database.String, serverOutboxTable)
	return nil
}

// walk runs the five scenarios on db, whose business table orders has the
// columns id (generated) and item; cfg carries the store settings.
func walk(ctx context.Context, out io.Writer, db *sqlx.DB, label, orders string, cfg outbox.Config, verbose bool) error {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.Logger = logger
	cfg.Dispatcher.Workers = 1     // one worker makes the overflow scenario easy to see
	cfg.Dispatcher.HotCapacity = 2 // a tiny hot queue, to overflow it on purpose
	cfg.Dispatcher.MaxAttempts = 3
	cfg.Dispatcher.Retry = retry.Exponential{BaseDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond}
	cfg.Poller.Interval = 200 * time.Millisecond
	cfg.Poller.SkipRecent = 100 * time.Millisecond
	ob, err := outbox.New(ctx, db, cfg)
	if err != nil {
		return err
	}
	d := &demo{out: out, ob: ob, insertOrder: db.Rebind("INSERT INTO " + orders + " (item) VALUES (?)"), gate: make(chan struct{}), slowIn: make(chan string, 16),
		calledAt: map[string]time.Time{}, flushWindow: cmp.Or(cfg.Dispatcher.DoneFlushWindow, dispatcher.DefaultDoneFlushWindow)}
	close(d.gate) // open until scenario 3 closes it
	d.register()
	if err := ob.Start(ctx); err != nil {
		return err
	}
	defer ob.Close(context.WithoutCancel(ctx))

	fmt.Fprintf(out, "outbox demo on %s\n\n", label)
	steps := []func(context.Context) error{d.commit, d.rollback, d.overflow, d.failing, d.wildcardSummary,
		func(ctx context.Context) error { return d.inboxStep(ctx, db, logger) }}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if err := ob.Close(ctx); err != nil {
		return err
	}
	return d.table(ctx)
}

func (d *demo) register() {
	d.ob.RegisterFunc("OrderPlaced", func(_ context.Context, e core.Envelope) error {
		now := time.Now()
		d.mu.Lock()
		if _, ok := d.calledAt[e.ID()]; !ok {
			d.calledAt[e.ID()] = now
		}
		d.mu.Unlock()
		d.say("   listener OrderPlaced got %s for aggregate %s", short(e.ID()), e.AggregateID())
		return nil
	})
	d.ob.RegisterFunc("Slow", func(_ context.Context, e core.Envelope) error {
		d.slowIn <- e.ID()
		return nil
	})
	d.ob.RegisterFunc("PaymentRequested", func(context.Context, core.Envelope) error {
		return errors.New("payment provider unavailable")
	})
	d.ob.RegisterAll(core.ListenerFunc(func(_ context.Context, e core.Envelope) error {
		d.wildcard.Add(1)
		d.mu.Lock()
		d.seen = append(d.seen, e.Type())
		d.mu.Unlock()
		return nil
	}))
}

// publish runs one business transaction: an order row and the given events.
// fail makes the business code return an error, so everything rolls back.
func (d *demo) publish(ctx context.Context, fail error, envs ...core.Envelope) error {
	return d.ob.InTx(ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if _, err := tx.ExecContext(ctx, d.insertOrder, "book"); err != nil {
			return err
		}
		for _, env := range envs {
			if _, err := d.ob.Publish(ctx, env); err != nil {
				return err
			}
		}
		return fail
	})
}

func (d *demo) commit(ctx context.Context) error {
	d.say("1. Commit: the event row commits with the business row, then goes straight to a worker")
	env, err := outbox.NewEvent("OrderPlaced").AggregateType("Order").AggregateID("order-1").
		PayloadJSONString(`{"item":"book","qty":1}`).Build()
	if err != nil {
		return err
	}
	if err := d.publish(ctx, nil, env); err != nil {
		return err
	}
	committed := time.Now()
	if err := d.waitStatus(ctx, env.ID(), core.StatusDone); err != nil {
		return err
	}
	doneAfter := time.Since(committed)
	d.mu.Lock()
	called := d.calledAt[env.ID()]
	d.mu.Unlock()
	// The after-commit hook runs inside InTx: the worker may call the
	// listener before InTx has returned.
	if latency := called.Sub(committed); latency > 0 {
		d.say("   the listener was called %v after the commit returned: the hot path, no polling (the poller runs every %v)",
			latency.Round(time.Microsecond), 200*time.Millisecond)
	} else {
		d.say("   the listener was called before the commit had even returned: the hot path, no polling (the poller runs every %v)",
			200*time.Millisecond)
	}
	d.say("   row %s is DONE %v after commit: DONE rows are written in coalesced batches (DoneFlushWindow %v), not one write per event\n",
		short(env.ID()), doneAfter.Round(time.Millisecond), d.flushWindow)
	return nil
}

func (d *demo) rollback(ctx context.Context) error {
	d.say("2. Rollback: the business code fails, so neither the order nor the event exists")
	env, err := outbox.JSONEvent("OrderPlaced", `{"item":"lamp"}`)
	if err != nil {
		return err
	}
	err = d.publish(ctx, errors.New("out of stock"), env)
	d.say("   transaction returned %q", err)
	if _, err := d.ob.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("rollback left a row behind: %v", err)
	}
	d.say("   no row for %s: nothing is ever sent for a rolled-back transaction\n", short(env.ID()))
	return nil
}

func (d *demo) overflow(ctx context.Context) error {
	d.say("3. Overflow: one busy worker, a hot queue of 2; six events in one transaction")
	blocker, err := outbox.JSONEvent("Slow", `{}`)
	if err != nil {
		return err
	}
	d.gate = make(chan struct{})
	d.ob.Register("Slow", core.ListenerFunc(func(context.Context, core.Envelope) error {
		<-d.gate
		return nil
	}))
	if err := d.publish(ctx, nil, blocker); err != nil {
		return err
	}
	<-d.slowIn // the worker is now held by the slow listener
	var envs []core.Envelope
	for i := range 6 {
		env, err := outbox.NewEvent("Slow").PayloadJSONString(fmt.Sprintf(`{"n":%d}`, i)).Build()
		if err != nil {
			return err
		}
		envs = append(envs, env)
	}
	if err := d.publish(ctx, nil, envs...); err != nil {
		return err
	}
	counts, err := d.ob.CountByStatus(ctx)
	if err != nil {
		return err
	}
	d.say("   Publish returned OK for all six; hot queue holds %d, %d rows stay NEW for the poller",
		d.hotDepth(), counts[core.StatusNew]-d.hotDepth()-1)
	close(d.gate)
	start := time.Now()
	for _, env := range append(envs, blocker) {
		if err := d.waitStatus(ctx, env.ID(), core.StatusDone); err != nil {
			return err
		}
	}
	d.say("   worker freed: the poller picked up the dropped rows; all seven DONE after %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func (d *demo) hotDepth() int { return d.ob.DispatcherStats().Hot }

func (d *demo) failing(ctx context.Context) error {
	d.say("4. Failing listener: retried in process with backoff, DEAD after 3 attempts")
	env, err := outbox.JSONEvent("PaymentRequested", `{"amount":42}`)
	if err != nil {
		return err
	}
	if err := d.publish(ctx, nil, env); err != nil {
		return err
	}
	last := -1
	for {
		rec, err := d.ob.Get(ctx, env.ID())
		if err != nil {
			return err
		}
		if rec.Attempts != last {
			last = rec.Attempts
			d.say("   status %-5s attempts %d %s", rec.Status, rec.Attempts, errNote(rec.LastError))
		}
		if rec.Status == core.StatusDead {
			break
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("waiting for DEAD: %w", err)
		}
	}
	d.say("")
	return nil
}

func (d *demo) wildcardSummary(context.Context) error {
	d.say("5. Wildcard: a RegisterAll listener ran after the typed listeners for every delivered event")
	d.mu.Lock()
	types := map[string]int{}
	for _, t := range d.seen {
		types[t]++
	}
	d.mu.Unlock()
	names := make([]string, 0, len(types))
	for t, n := range types {
		names = append(names, fmt.Sprintf("%s×%d", t, n))
	}
	sort.Strings(names)
	d.say("   it saw %d deliveries: %s", d.wildcard.Load(), strings.Join(names, ", "))
	d.say("   (PaymentRequested is absent: its typed listener failed first, so the wildcard never ran for it)\n")
	return nil
}

func (d *demo) table(ctx context.Context) error {
	counts, err := d.ob.CountByStatus(ctx)
	if err != nil {
		return err
	}
	d.say("Rows per status:")
	d.say("   %-6s %-6s %s", "status", "value", "rows")
	for _, st := range []core.Status{core.StatusNew, core.StatusDone, core.StatusRetry, core.StatusDead} {
		d.say("   %-6s %-6d %d", st, int(st), counts[st])
	}
	return nil
}

func (d *demo) waitStatus(ctx context.Context, id string, want core.Status) error {
	for {
		rec, err := d.ob.Get(ctx, id)
		if err != nil {
			return err
		}
		if rec.Status == want {
			return nil
		}
		if err := pause(ctx); err != nil {
			return fmt.Errorf("waiting for %s to be %v (is %v): %w", short(id), want, rec.Status, err)
		}
	}
}

// pause waits a little before re-reading a row, or returns ctx's error.
func pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Millisecond):
		return nil
	}
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func short(id string) string {
	if len(id) > 10 {
		return id[:4] + "…" + id[len(id)-4:]
	}
	return id
}

func errNote(s string) string {
	if s == "" {
		return ""
	}
	return "(last error: " + s + ")"
}
