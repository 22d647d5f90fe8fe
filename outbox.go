// Package outbox is the one-screen entry point of the transactional outbox:
// it wires a SQL store, a listener registry, a dispatcher, a poller and a
// transaction manager together.
//
// Business code publishes events inside its database transaction; the
// event row commits (or rolls back) with the business writes, and after
// commit the event goes straight to an in-process worker that runs the
// listeners and marks the row DONE. A low-frequency poller delivers
// whatever the fast path missed. Delivery is at least once: listeners must
// deduplicate by event id.
//
// Every part also works on its own: see packages core, txctx, jdbcstore,
// registry, retry, dispatcher and poller.
package outbox

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/registry"
	"github.com/outbox-go/outbox/txctx"
)

// Config configures [New]. The zero value is a working configuration for
// the default table on a database whose driver is detected (sqlite3, mysql).
type Config struct {
	// Store configures the SQL store (dialect, table name, error length).
	// Logger and Now default to this Config's.
	Store jdbcstore.Config
	// Dispatcher configures workers, queues and retries. Logger and
	// Metrics default to this Config's.
	Dispatcher dispatcher.Config
	// Poller configures the fallback scan. Logger and Metrics default to
	// this Config's.
	Poller poller.Config
	// DisablePoller turns the fallback scan off.
	// Events dropped by a full hot queue then wait until a poller runs.
	DisablePoller bool
	// EnableCleanup runs the background retention purge (package cleanup):
	// DONE rows older than 7 days and DEAD rows older than 30 days, every
	// hour, 500 rows per statement, unless Cleanup says otherwise. Off by
	// default.
	EnableCleanup bool
	// Cleanup configures the purge when EnableCleanup is set. Logger and
	// Metrics default to this Config's.
	Cleanup cleanup.Config
	// SkipSchema leaves the schema alone; by default New applies the
	// embedded, idempotent schema (CREATE … IF NOT EXISTS).
	SkipSchema bool
	// Logger is the default logger of every part. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics is the default metrics sink of every part. Defaults to core.NopMetrics{}.
	Metrics core.Metrics
}

// Outbox bundles the parts. Its fields are the parts themselves, for
// whatever the methods here do not cover. The embedded Registry gives it
// Register, RegisterFunc, RegisterType, RegisterAll, RegisterAllFunc and
// TryRegister: listeners per event type (run in registration order), then
// the listeners of every type. An event no listener is registered for is
// marked DONE unless Config.Dispatcher.Unhandled says otherwise.
type Outbox struct {
	Store *jdbcstore.Store
	*registry.Registry
	Dispatcher *dispatcher.Dispatcher
	Poller     *poller.Poller   // nil when DisablePoller
	Cleaner    *cleanup.Cleaner // nil unless EnableCleanup
	Client     *core.Client
	Tx         *txctx.Manager

	metrics core.Metrics
}

// New builds the parts on db and, unless cfg.SkipSchema, applies the
// schema. Nothing runs until [Outbox.Start].
func New(ctx context.Context, db *sqlx.DB, cfg Config) (*Outbox, error) {
	if db == nil {
		return nil, &core.ConfigError{Field: "db", Msg: "must not be nil"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = core.NopMetrics{}
	}
	if cfg.Store.Logger == nil {
		cfg.Store.Logger = cfg.Logger
	}
	core.Inherit(&cfg.Dispatcher.Logger, &cfg.Dispatcher.Metrics, cfg.Logger, cfg.Metrics)
	core.Inherit(&cfg.Poller.Logger, &cfg.Poller.Metrics, cfg.Logger, cfg.Metrics)
	store, err := jdbcstore.New(db, cfg.Store)
	if err != nil {
		return nil, err
	}
	if !cfg.SkipSchema {
		if err := store.ApplySchema(ctx); err != nil {
			return nil, err
		}
	}
	reg := registry.New()
	disp, err := dispatcher.New(store, reg, cfg.Dispatcher)
	if err != nil {
		return nil, err
	}
	o := &Outbox{Store: store, Registry: reg, Dispatcher: disp,
		Tx: txctx.NewX(db, txctx.WithLogger(cfg.Logger), txctx.WithWriteGate(store.WriteGate()),
			txctx.WithYield(disp.HotWaiting))}
	if o.Client, err = core.NewClient(store, disp); err != nil {
		return nil, err
	}
	if !cfg.DisablePoller {
		if o.Poller, err = poller.New(store, disp, cfg.Poller); err != nil {
			return nil, err
		}
	}
	if cfg.EnableCleanup {
		core.Inherit(&cfg.Cleanup.Logger, &cfg.Cleanup.Metrics, cfg.Logger, cfg.Metrics)
		if o.Cleaner, err = cleanup.New(store, cfg.Cleanup); err != nil {
			return nil, err
		}
	}
	o.metrics = cfg.Metrics
	return o, nil
}

// Start starts the dispatcher's workers and the poller. Register listeners
// before Start; registering later is allowed and takes effect at once.
func (o *Outbox) Start(ctx context.Context) error {
	if err := o.Dispatcher.Start(ctx); err != nil {
		return err
	}
	if o.Poller != nil {
		if err := o.Poller.Start(ctx); err != nil {
			return errors.Join(err, o.Dispatcher.Close(ctx))
		}
	}
	if o.Cleaner != nil {
		if err := o.Cleaner.Start(ctx); err != nil {
			return errors.Join(err, o.Close(ctx))
		}
	}
	return nil
}

// Close stops the poller, then lets the dispatcher finish what it holds
// until ctx expires. Undelivered events stay in the database, and the
// leases this outbox holds on them are released (see
// dispatcher.Dispatcher.Close), so the next process or another node
// delivers them at once. It does not close db.
func (o *Outbox) Close(ctx context.Context) error {
	var errPoller, errCleaner error
	if o.Cleaner != nil {
		errCleaner = o.Cleaner.Stop(ctx)
	}
	if o.Poller != nil {
		errPoller = o.Poller.Stop(ctx)
	}
	return errors.Join(errCleaner, errPoller, o.Dispatcher.Close(ctx))
}

// InTx runs fn in a transaction carried by the ctx given to fn (see
// txctx.Manager.Do): commit on nil, rollback on error or panic. Use
// txctx.From(ctx) inside fn for the business writes.
func (o *Outbox) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return o.Tx.Do(ctx, fn)
}

// Publish inserts env on the transaction carried by ctx and hands it to the
// dispatcher after commit. See core.Client.Publish.
func (o *Outbox) Publish(ctx context.Context, env Envelope) (string, error) {
	return o.Client.Publish(ctx, env)
}

// ReplayDead moves DEAD events matching f back to NEW (see
// jdbcstore.Store.ReplayDead); the poller then delivers them through the
// normal path. The count goes to Metrics when it implements core.OpsMetrics.
func (o *Outbox) ReplayDead(ctx context.Context, f jdbcstore.DeadFilter, opts jdbcstore.ReplayOptions) (jdbcstore.ReplayResult, error) {
	res, err := o.Store.ReplayDead(ctx, f, opts)
	if m, ok := o.metrics.(core.OpsMetrics); ok && res.Replayed > 0 {
		m.Replayed(res.Replayed)
	}
	return res, err
}
