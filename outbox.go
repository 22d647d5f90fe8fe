// Package outbox is the one-screen entry point of the transactional outbox:
// it wires a SQL store, a listener registry, a dispatcher, a poller and a
// transaction manager together.
//
// Business code publishes events inside its database transaction
// ([Outbox.InTx] and [Outbox.Publish], or [Outbox.PublishTx] on a
// transaction of its own); the event row commits (or rolls back) with the
// business writes, and after commit the event goes straight to an
// in-process worker that runs the listeners and marks the row DONE. A low-frequency poller delivers
// whatever the fast path missed. Delivery is at least once: listeners must
// deduplicate by event id.
//
// Every part also works on its own: see packages core, txctx, jdbcstore,
// registry, retry, dispatcher and poller.
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/notify"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/internal/sqldriver"
	"github.com/outbox-go/outbox/internal/txopts"
	"github.com/outbox-go/outbox/internal/wiring"
	"github.com/outbox-go/outbox/internal/writegate"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/registry"
	"github.com/outbox-go/outbox/txctx"
)

// Config configures [New]. The zero value is a working configuration for
// the default table on a database whose driver is detected: sqlite3,
// mysql or pgx, once the program imports the dialect package
// (jdbcstore/sqlite, jdbcstore/mysql, jdbcstore/postgres). An undetected
// driver is reported as an invalid "Store.Dialect" that also wraps
// jdbcstore.ErrUnsupportedDriver. Without a Store.Dialect, an *sqlx.DB
// named after the driver of another database than its own
// (sqlx.NewDb(sqliteDB, "mysql")) is an invalid "Store.Dialect" too.
//
// New validates the whole Config before it touches the database and
// reports every problem at once: an error joining one *core.ConfigError
// per invalid field (errors.Is core.ErrInvalidConfig), each named by its
// path from this Config, such as "Dispatcher.Workers", "Poller.BatchSize"
// or "Store.Table" (the last also errors.Is core.ErrInvalidIdentifier).
// Nothing is written when New fails.
type Config struct {
	// Store configures the SQL store (dialect, table name, error length).
	// Logger defaults to this Config's; leave Now nil (see Now below).
	Store jdbcstore.Config
	// Dispatcher configures workers, queues and retries. Logger and
	// Metrics default to this Config's; leave Now nil.
	Dispatcher dispatcher.Config
	// Poller configures the fallback scan. Logger and Metrics default to
	// this Config's; leave Now nil. Not validated when DisablePoller.
	Poller poller.Config
	// DisablePoller turns the fallback scan off.
	// Events dropped by a full hot queue then wait until a poller runs.
	DisablePoller bool
	// EnableCleanup runs the background retention purge (package cleanup):
	// DONE rows older than 7 days and DEAD rows older than 30 days, first
	// within a minute of Start, then every hour (±10%), 500 rows per
	// statement, unless Cleanup says otherwise. Off by default.
	EnableCleanup bool
	// Cleanup configures the purge when EnableCleanup is set. Logger and
	// Metrics default to this Config's. Not validated without
	// EnableCleanup.
	Cleanup cleanup.Config
	// Ordering delivers the events of its types in order per aggregate
	// (see the README, "Ordered delivery"). By default only events whose
	// builder asked for it (core.Builder.Ordered, OrderKey) are ordered.
	Ordering core.Ordering
	// SkipSchema leaves the schema alone; by default New applies the
	// embedded, idempotent schema (CREATE … IF NOT EXISTS), after the
	// whole Config was found valid.
	SkipSchema bool
	// Now is the one clock of every part: the store's created_at,
	// available_at and done_at, the dispatcher's retry times and leases,
	// the poller's due times, skip-recent window and lag, the cleanup's
	// retention cutoffs. Defaults to time.Now. The parts' own Now fields
	// (Store.Now, Dispatcher.Now, Poller.Now) must stay nil: New reports
	// them as invalid, so that no part runs on another clock. Nodes sharing
	// a database compare each other's leases on their own clocks: their
	// clocks must agree to well within Dispatcher.Lease −
	// (ListenerTimeout + ListenerGrace + StatusTimeout), 84 s with the
	// defaults, or live leases are taken and events delivered twice.
	Now func() time.Time
	// Logger is the default logger of every part. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics is the default metrics sink of every part. Defaults to
	// core.NopMetrics{}. A nil value of a type (a nil *T) is refused.
	Metrics core.Metrics
	// Observer, when set, sees every publish (and adds its headers, such
	// as the trace context, to the event), every delivery attempt (the
	// listeners run with the context it returns), every DONE write and
	// every claim: the OpenTelemetry and Prometheus modules of this
	// repository implement it. It is handed to Dispatcher and Poller
	// unless they have their own. Nil means none; a nil value of a type
	// (a nil *T) is refused.
	Observer core.Observer
}

// Outbox is the transactional outbox of one database: create it with
// [New], register listeners ([Outbox.Register], [Outbox.RegisterFunc], …),
// [Outbox.Start] it, and publish with [Outbox.Publish] inside
// [Outbox.InTx] (or [Outbox.PublishTx] on a transaction of your own).
// Listeners of an event's type run in registration order, then the
// listeners of every type; an event no listener is registered for is
// marked DONE unless Config.Dispatcher.Unhandled says otherwise. Inspect
// events with [Outbox.Get] and [Outbox.CountByStatus]; bring your own
// transaction in with [Outbox.Adopt].
type Outbox struct {
	store      *jdbcstore.Store
	dispatcher *dispatcher.Dispatcher
	poller     *poller.Poller   // nil when DisablePoller
	cleaner    *cleanup.Cleaner // nil unless EnableCleanup
	notify     *notify.Listener // nil unless the database announces commits and a poller runs
	client     *publish.Client
	tx         *txctx.Manager

	reg     *registry.Registry
	metrics core.Metrics

	// notifyMu orders Start's start of notify and Close: once Close began
	// (closing), notify is never started (a Start running beside Close
	// left the LISTEN goroutine and its connection running).
	notifyMu sync.Mutex
	closing  bool
}

func init() {
	parts.Outbox = func(ob any) parts.Parts {
		o := ob.(*Outbox)
		return parts.Parts{Store: o.store, Dispatcher: o.dispatcher, Poller: o.poller,
			Cleaner: o.cleaner, Client: o.client, Tx: o.tx}
	}
}

// New builds the outbox on db, the handle the application already has:
// a *sql.DB (its driver is detected: go-sql-driver/mysql, mattn
// go-sqlite3 or pgx; see [Config]) or a *sqlx.DB. It validates the whole cfg first (see
// [Config]) and, unless cfg.SkipSchema, then applies the schema. Nothing
// runs until [Outbox.Start]; Close does not close db. A nil db, or an
// *sqlx.DB holding a nil *sql.DB, is reported as a *core.ConfigError
// named "db".
func New[DB *sql.DB | *sqlx.DB](ctx context.Context, db DB, cfg Config) (*Outbox, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	x := sqldriver.Of(db)
	store, err := cfg.check(x)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	reg := registry.New()
	disp, err := dispatcher.New(store, reg, cfg.Dispatcher)
	if err != nil {
		return nil, cfgpath.Prefix("Dispatcher", err)
	}
	q := handoff.Of(disp, "")
	o := &Outbox{store: store, reg: reg, dispatcher: disp, metrics: cfg.Metrics,
		tx: txctx.NewX(x, txctx.WithLogger(cfg.Logger),
			txctx.Option(txopts.Hooks(writegate.Of(x.DB), q.HotWaiting)))}
	if o.client, err = publish.New(store, q); err != nil {
		return nil, err
	}
	o.client.SetOrdering(cfg.Ordering)
	o.client.Observer = cfg.Observer
	if !cfg.DisablePoller {
		if o.poller, err = poller.New(store, disp, cfg.Poller); err != nil {
			return nil, cfgpath.Prefix("Poller", err)
		}
		o.notify = notify.New(store, o.poller.Wake, cfg.Logger)
		// The next event of an ordered key is claimed as soon as its
		// predecessor finished, and a put-off event when it comes due,
		// not at the next poll.
		handoff.Link(disp, o.poller, "")
	}
	if cfg.EnableCleanup {
		if o.cleaner, err = cleanup.New(store, cfg.Cleanup); err != nil {
			return nil, cfgpath.Prefix("Cleanup", err)
		}
	}
	if !cfg.SkipSchema {
		if err := store.ApplySchema(ctx); err != nil {
			return nil, cfgpath.Prefix("Store", err) // Store.Table: not an outbox table
		}
	}
	return o, nil
}

// check validates the whole of c on db, reporting every problem at once,
// and returns the store built on db. It writes nothing.
func (c Config) check(db *sqlx.DB) (*jdbcstore.Store, error) {
	var p cfgpath.Collector
	switch {
	case db == nil:
		p.Field("db", "must not be nil")
	case db.DB == nil:
		p.Field("db", "is an *sqlx.DB holding a nil *sql.DB")
	}
	// A nil value of an interface type (a nil *T) would pass here and
	// panic in a background goroutine at the first poll or delivery.
	p.NilValue("Metrics", c.Metrics)
	p.NilValue("Observer", c.Observer)
	p.Logger("Logger", c.Logger)
	p.UnsetClock("Store.Now", c.Store.Now)
	p.UnsetClock("Dispatcher.Now", c.Dispatcher.Now)
	p.Add("Dispatcher", c.Dispatcher.Validate())
	if !c.DisablePoller {
		p.UnsetClock("Poller.Now", c.Poller.Now)
		p.Add("Poller", c.Poller.Validate())
	}
	if c.EnableCleanup {
		p.Add("Cleanup", c.Cleanup.Validate())
	}
	p.Add("Ordering", c.Ordering.Validate())
	var store *jdbcstore.Store
	if db != nil && db.DB != nil {
		// New validates the store's fields and its dialect together.
		var err error
		sc := c.withDefaults().Store
		if c.Store.Logger == nil && cfgpath.NoHandler(c.Logger) {
			sc.Logger = nil // inherited: reported as Logger, not again as Store.Logger
		}
		store, err = jdbcstore.New(db, sc)
		p.Add("Store", err)
	} else {
		p.Add("Store", c.Store.Validate())
	}
	return store, p.Err()
}

// withDefaults fills the defaults and hands Logger, Metrics and Now down
// to every part.
func (c Config) withDefaults() Config {
	wiring.Inherit(&c.Logger, &c.Metrics, slog.Default(), core.NopMetrics{})
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Store.Logger == nil {
		c.Store.Logger = c.Logger
	}
	wiring.Inherit(&c.Dispatcher.Logger, &c.Dispatcher.Metrics, c.Logger, c.Metrics)
	wiring.Inherit(&c.Poller.Logger, &c.Poller.Metrics, c.Logger, c.Metrics)
	wiring.Inherit(&c.Cleanup.Logger, &c.Cleanup.Metrics, c.Logger, c.Metrics)
	c.Store.Now, c.Dispatcher.Now, c.Poller.Now = c.Now, c.Now, c.Now
	if c.Dispatcher.Observer == nil {
		c.Dispatcher.Observer = c.Observer
	}
	if c.Poller.Observer == nil {
		c.Poller.Observer = c.Observer
	}
	return c
}

// Start starts the dispatcher's workers and the poller (and, on a
// database that announces commits such as PostgreSQL, the listener that
// wakes the poller; see jdbcstore.Notifier). Register listeners
// before Start; registering later is allowed and takes effect at once.
// Events published before Start are owned by this outbox like any other
// (leased for Dispatcher.Lease) and wait in its queues for Start; a
// process that publishes and never starts should Close the outbox before
// it exits, which releases their leases, or other nodes deliver them only
// once the leases expire.
// Start runs once: a second call returns an error (wrapping
// core.ErrInvalidConfig, "already started"), and a call after Close
// returns core.ErrClosed.
//
// Start returns at once; cancelling ctx afterwards does not stop the
// outbox: Close does.
func (o *Outbox) Start(ctx context.Context) error {
	if err := o.dispatcher.Start(ctx); err != nil { // a nil ctx: core.ErrNilContext
		return err
	}
	if o.poller != nil {
		// Rows published before Start are taken however recent
		// (SkipRecent applies to younger ones): those a Close released,
		// or published unowned, just before a restart waited a whole
		// Interval for the next poll.
		handoff.FreshStart(o.poller)
		if err := o.poller.Start(ctx); err != nil {
			return errors.Join(err, o.dispatcher.Close(ctx))
		}
		o.startNotify()
	}
	if o.cleaner != nil {
		if err := o.cleaner.Start(ctx); err != nil {
			return errors.Join(err, o.Close(ctx))
		}
	}
	return nil
}

// Close stops the poller, then lets the dispatcher finish what it holds
// until ctx expires. Undelivered events stay in the database, and the
// leases this outbox holds on them are released (see
// dispatcher.Dispatcher.Close), so the next process or another node
// delivers them at once (the polls after Start take every row published
// before it however recent; a node already running, at its next poll). If ctx ends first, Close returns ctx's error
// (itself, joined only with other errors of its parts, if any); calling
// it again waits again. It does not close db.
//
// Close waits for the listeners, so a listener must not call it on its own
// goroutine: with the listener's ctx (or one derived from it) Close returns
// dispatcher.ErrCloseInListener at once and stops nothing; with another
// ctx, such as context.Background(), it cannot tell and waits until that
// ctx ends (for ever for context.Background()). To close from a listener,
// call go ob.Close(context.Background()): it returns once the listener has.
//
// Releasing the leases is a write to the outbox table: on MySQL/MariaDB it
// may wait for the row lock of an event of this node's that an open
// business transaction holds (an event it published, or the event before
// an ordered one it published), on SQLite for any open business
// transaction's write lock, so a transaction left open delays Close (the
// release is bounded by ctx and by Dispatcher.StatusTimeout; PostgreSQL's
// release does not wait). A release that gives up on that lock leaves
// the leases it could not release to expire after Dispatcher.Lease.
// Finish or roll back the business transactions first. Once ctx ended,
// the listeners, their contexts cancelled, get Dispatcher.ListenerGrace
// to return (the leases of their events are released with the others),
// then the DONE writes of listeners that succeeded and the release are
// bounded together by Dispatcher.StatusTimeout rather than by ctx (see
// dispatcher.Dispatcher.Close), so Close may return ListenerGrace +
// StatusTimeout after ctx ended.
//
// Publishing after Close still works: the event is written, unowned, on
// the business transaction, and a poller of another process (or of this
// one's next start) delivers it; this Outbox runs no listener any more.
func (o *Outbox) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if o.dispatcher.InListener(ctx) {
		return dispatcher.ErrCloseInListener // before anything is stopped
	}
	var errPoller, errCleaner error
	o.notifyMu.Lock()
	o.closing = true
	o.notifyMu.Unlock()
	errNotify := o.notify.Stop(ctx)
	if o.cleaner != nil {
		errCleaner = o.cleaner.Close(ctx)
	}
	if o.poller != nil {
		errPoller = o.poller.Close(ctx)
	}
	return engine.CloseErr(ctx, errNotify, errCleaner, errPoller, o.dispatcher.Close(ctx))
}

// startNotify starts the listener of the database's announcements,
// unless Close began.
func (o *Outbox) startNotify() {
	o.notifyMu.Lock()
	defer o.notifyMu.Unlock()
	if !o.closing {
		o.notify.Start()
	}
}

// InTx runs fn in a transaction carried by the ctx given to fn (see
// txctx.Manager.Do): commit on nil, rollback on error or panic. When ctx
// already carries a transaction of this database (an outer InTx, Adopt),
// fn joins it and its result is returned as is: the outer owner decides
// whether to commit (an error fn returns rolls nothing back by itself).
// Use txctx.From(ctx) inside fn for the business writes.
func (o *Outbox) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return o.tx.Do(ctx, fn)
}

// Adopt carries tx, a transaction the caller began on this outbox's
// database and will commit, in the returned ctx (see
// txctx.Manager.Adopt): [Outbox.Publish] writes on it, [Outbox.InTx]
// joins it, and committing through the returned *txctx.Tx runs the
// after-commit hooks, so its events take the hot path. A nil tx is no
// transaction: Publish on the returned ctx and the returned Tx's Commit
// and Rollback return core.ErrNoTransaction, and InTx begins a
// transaction of its own (see txctx.Adopt). ctx must not be nil: Adopt
// returns no error, so a nil ctx panics, as in context.WithValue.
func (o *Outbox) Adopt(ctx context.Context, tx *sql.Tx) (context.Context, *txctx.Tx) {
	return o.tx.Adopt(ctx, tx)
}

// AdoptX is [Outbox.Adopt] for a *sqlx.Tx.
func (o *Outbox) AdoptX(ctx context.Context, tx *sqlx.Tx) (context.Context, *txctx.Tx) {
	return o.tx.AdoptX(ctx, tx)
}

// DiscardDead deletes the DEAD events matching f (see
// jdbcstore.Store.DiscardDead): they are never delivered. Discarding the
// DEAD event that blocks an ordering key releases the key: its next event
// is delivered by the poller, which DiscardDead wakes (a discard by
// another process, outboxctl's or a dashboard's over the store, wakes the
// nodes' pollers on PostgreSQL, through its NOTIFY; elsewhere they take
// the key's next event at their next poll, within Poller.Interval).
func (o *Outbox) DiscardDead(ctx context.Context, f jdbcstore.DeadFilter, opts jdbcstore.DiscardOptions) (jdbcstore.DiscardResult, error) {
	if ctx == nil {
		return jdbcstore.DiscardResult{}, core.ErrNilContext
	}
	res, err := o.store.DiscardDead(ctx, f, opts)
	if res.Discarded > 0 {
		o.wakePoller() // a key it blocked goes on
	}
	return res, err
}

// wakePoller makes the poller, if any, poll at once for the rows an
// operation left unowned, instead of at the end of its Interval.
func (o *Outbox) wakePoller() {
	if o.poller != nil {
		o.poller.Wake()
	}
}

// ReplayDead moves DEAD events matching f back to NEW (see
// jdbcstore.Store.ReplayDead) and wakes the poller, which delivers them
// through the normal path at once (a replay by another process,
// outboxctl's or a dashboard's over the store, wakes the nodes' pollers
// on PostgreSQL, through its NOTIFY; elsewhere they take the events at
// their next poll, within Poller.Interval). An ordered event under the skip policy whose key went on
// without it stays DEAD (ReplayResult.NotReplayed says why). The count
// goes to Metrics when it implements core.OpsMetrics.
func (o *Outbox) ReplayDead(ctx context.Context, f jdbcstore.DeadFilter, opts jdbcstore.ReplayOptions) (jdbcstore.ReplayResult, error) {
	if ctx == nil {
		return jdbcstore.ReplayResult{}, core.ErrNilContext
	}
	res, err := o.store.ReplayDead(ctx, f, opts)
	if res.Replayed > 0 {
		if m, ok := o.metrics.(core.OpsMetrics); ok {
			m.Replayed(res.Replayed)
		}
		o.wakePoller()
	}
	return res, err
}
