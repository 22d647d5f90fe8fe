package tenant

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/notify"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/internal/txopts"
	"github.com/outbox-go/outbox/internal/wiring"
	"github.com/outbox-go/outbox/internal/writegate"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/registry"
	"github.com/outbox-go/outbox/txctx"
)

// Config configures [New]. Databases or Discover names the databases
// (Discover when both are set); everything else has a default.
type Config struct {
	// Databases is the static set of databases. It is ignored, not even
	// checked, when Discover is set: the discovery names the set. Without
	// Discover, nil is refused (no set was named), while an empty, non-nil
	// set is meaningful: the outbox starts with no database, and
	// [Outbox.SetDatabases] adds them.
	Databases []Database
	// Discover returns the current set of databases (dynamic discovery).
	// New calls it once (an error fails New), then every
	// RefreshInterval while the outbox runs; [Outbox.Refresh] calls it now.
	Discover Discovery
	// RefreshInterval is the pause between discoveries. Defaults to 5 min;
	// negative: only [Outbox.Refresh] discovers.
	RefreshInterval time.Duration
	// Open opens a database of the set. Defaults to [Open].
	Open OpenFunc
	// Route maps a routing key to a store id. Defaults to the identity:
	// the routing key is the Database's ID.
	Route func(key string) string
	// DrainTimeout bounds how long a database that left the set may take
	// to finish the events the dispatcher holds for it before it is
	// closed. Defaults to the dispatcher's Lease.
	DrainTimeout time.Duration
	// Store is the configuration of every database's store (table name,
	// error length). Dialect, when nil, is detected per database; Logger
	// defaults to this Config's; leave Now nil (see Now below).
	Store jdbcstore.Config
	// Ordering delivers the events of its types in order per aggregate,
	// in every database (see outbox.Config.Ordering).
	Ordering core.Ordering
	// SkipSchema leaves the schemas alone; by default each database gets
	// the embedded, idempotent schema when it joins the set.
	SkipSchema bool
	// Dispatcher configures the one dispatcher (workers, queues, retries)
	// shared by every database. Logger and Metrics default to this
	// Config's; leave Now nil.
	Dispatcher dispatcher.Config
	// Poller configures the one poller over every database; its Selector
	// (core.RoundRobin by default, or core.DrainFirst) orders the stores.
	// Logger and Metrics default to this Config's; leave Now nil. Not
	// validated when DisablePoller.
	Poller poller.Config
	// DisablePoller turns the fallback scan off.
	DisablePoller bool
	// Now is the one clock of every part: the stores' stored times, the
	// dispatcher's retry times and leases, the poller's due times.
	// Defaults to time.Now. The parts' own Now fields (Store.Now,
	// Dispatcher.Now, Poller.Now) must stay nil: New reports them as
	// invalid, so that no part runs on another clock.
	Now func() time.Time
	// Logger is the default logger of every part. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives every signal; when it implements core.StoreMetrics,
	// per-store signals go to its ForStore(id). Defaults to core.NopMetrics{}.
	Metrics core.Metrics
	// Observer, when set, sees every publish, delivery attempt, DONE
	// write and claim of every database of the set; the delivery
	// attempts, DONE writes and claims are labelled with their database's
	// id (core.Delivery.Store), the publishes are not (core.Observer's
	// Publish has no store: the event's TenantID, when set, tells it);
	// see outbox.Config.Observer.
	// It is handed to Dispatcher and Poller unless they have their own.
	Observer core.Observer
}

// Tenant is one database of the set, ready to publish to: what the router
// returns. It stays usable until its database leaves
// the set; after that its database is closed and every call fails.
type Tenant struct {
	id     string
	db     *sqlx.DB
	store  *jdbcstore.Store
	tx     *txctx.Manager
	client *publish.Client
	queue  handoff.Queue
	open   *engine.Counter // the InTx calls under way
	closed func() bool     // reports whether the set was closed
}

// ID returns the store id (the Database's ID).
func (t *Tenant) ID() string { return t.id }

// DB returns the database's pool, for reads and writes outside
// [Tenant.InTx]. It is closed once the database leaves the set.
func (t *Tenant) DB() *sqlx.DB { return t.db }

// InTx runs fn in a transaction on the tenant's database, carried by the
// ctx given to fn: commit on nil, rollback on error or panic (see
// txctx.Manager.Do; joined to an outer transaction of this database, fn's
// result is returned as is and the outer owner decides whether to
// commit). Use txctx.From(ctx) for the business writes and
// [Tenant.Publish] for events.
//
// Once the database is leaving the set (removed or replaced by
// SetDatabases or Refresh, or the set closing), InTx runs nothing and
// returns an error wrapping ErrUnknownKey (and core.ErrClosed after
// Close), as For does for its key: get the tenant again with For. (Its
// events would be committed leased to this node, which no longer delivers
// them.) An InTx joined to an outer one of this database, begun before,
// still runs.
func (t *Tenant) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if t.open.Hold() {
		defer t.open.Release()
	} else if ctx != nil && !t.inOwnTx(ctx) { // leaving the set (a nil ctx: Do's error)
		return t.leftError()
	} // else it joins an outer InTx of this database, counted already
	return t.tx.Do(ctx, fn)
}

// drainInTx refuses new InTx calls and waits, until ctx ends, for those
// under way.
func (t *Tenant) drainInTx(ctx context.Context) error {
	if _, err := t.open.Drain(ctx); err != nil {
		return fmt.Errorf("outbox: database %q: transactions begun with InTx still open: %w", t.id, err)
	}
	return nil
}

// leftError is the error of an InTx refused because the database is
// leaving the set.
func (t *Tenant) leftError() error {
	unknown := &UnknownKeyError{Key: t.id, StoreID: t.id}
	if t.closed() {
		return fmt.Errorf("%w: the tenant outbox set was closed (%w)", unknown, core.ErrClosed)
	}
	return fmt.Errorf("%w: the database is leaving the set", unknown)
}

// inOwnTx reports whether ctx carries an active transaction on the
// tenant's database (the innermost one ctx carries).
func (t *Tenant) inOwnTx(ctx context.Context) bool {
	tx, ok := txctx.From(ctx)
	return ok && tx.Active() && tx.Database() == t.db.DB
}

// Publish inserts env into the tenant's outbox on the transaction carried
// by ctx (begun by [Tenant.InTx] or adopted with [Tenant.Adopt]) and hands
// it to the dispatcher after commit. See outbox.Outbox.Publish.
func (t *Tenant) Publish(ctx context.Context, env core.Envelope) (string, error) {
	return t.client.Publish(ctx, env)
}

// PublishTx inserts env on tx, a transaction on the tenant's database, and
// returns the event id. A plain *sql.Tx or *sqlx.Tx has no after-commit
// hook: the poller delivers the event once tx committed. See
// outbox.Outbox.PublishTx.
func (t *Tenant) PublishTx(ctx context.Context, tx outbox.Tx, env core.Envelope) (string, error) {
	return t.client.PublishTx(ctx, tx, env)
}

// PublishAll inserts envs into the tenant's outbox on the transaction
// carried by ctx, together, and hands them to the dispatcher after
// commit; it returns their ids in order. See outbox.Outbox.PublishAll.
func (t *Tenant) PublishAll(ctx context.Context, envs ...core.Envelope) ([]string, error) {
	return t.client.PublishAll(ctx, envs...)
}

// PublishAllTx inserts envs on tx, a transaction on the tenant's
// database, together, and returns their ids in order. See
// outbox.Outbox.PublishAllTx.
func (t *Tenant) PublishAllTx(ctx context.Context, tx outbox.Tx, envs ...core.Envelope) ([]string, error) {
	return t.client.PublishAllTx(ctx, tx, envs...)
}

// Adopt carries tx, a transaction the caller began on the tenant's
// database, in the returned ctx (see txctx.Manager.Adopt): Publish writes
// on it, InTx joins it, and committing through the returned *txctx.Tx
// gives its events the hot path.
func (t *Tenant) Adopt(ctx context.Context, tx *sql.Tx) (context.Context, *txctx.Tx) {
	return t.tx.Adopt(ctx, tx)
}

// AdoptX is [Tenant.Adopt] for a *sqlx.Tx.
func (t *Tenant) AdoptX(ctx context.Context, tx *sqlx.Tx) (context.Context, *txctx.Tx) {
	return t.tx.AdoptX(ctx, tx)
}

// Get returns the stored record of the event with id in the tenant's
// outbox; an error matching core.ErrNotFound when there is none.
func (t *Tenant) Get(ctx context.Context, id string) (core.Record, error) {
	if ctx == nil {
		return core.Record{}, core.ErrNilContext
	}
	return t.store.Get(ctx, id)
}

// CountByStatus returns how many events the tenant's outbox holds in each
// status; every status is in the map, 0 when it has no rows.
func (t *Tenant) CountByStatus(ctx context.Context) (map[core.Status]int, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	return t.store.CountByStatus(ctx)
}

// Outbox is the outbox over several databases: a router to each database
// (a [Tenant]), one dispatcher and one poller for all of them, and one set
// of listeners ([Outbox.Register], [Outbox.RegisterFunc], …) shared by
// every database. Create it with [New]; it is safe for concurrent use.
type Outbox struct {
	dispatcher *dispatcher.Dispatcher
	poller     *poller.Poller // nil when DisablePoller

	reg       *registry.Registry
	cfg       Config
	set       *set[*Tenant]
	listeners listeners // of the databases that announce commits (notify.go)
}

// StoreID returns the id of the database whose event the listener given
// ctx (or a context derived from it) is delivering; "" for a context that
// is no listener's. The inbox's handlers have inbox.StoreID.
func StoreID(ctx context.Context) string { return dispatcher.StoreID(ctx) }

// New opens the databases of cfg.Databases (or, with cfg.Discover, of a
// first discovery),
// applies the schema to each unless SkipSchema, and wires the dispatcher
// and the poller over them. Nothing runs until [Outbox.Start]. A database
// that cannot be opened fails New.
//
// New validates the whole cfg before it opens any database and reports
// every problem at once: an error joining one *core.ConfigError per
// invalid field (errors.Is core.ErrInvalidConfig), each named by its path
// from Config, such as "Dispatcher.Workers" or "Store.Table" (the last
// also errors.Is core.ErrInvalidIdentifier).
func New(ctx context.Context, cfg Config) (*Outbox, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	reg := registry.New()
	disp, err := dispatcher.NewMulti(reg, cfg.Dispatcher)
	if err != nil {
		return nil, cfgpath.Prefix("Dispatcher", err)
	}
	o := &Outbox{reg: reg, dispatcher: disp, cfg: cfg}
	if !cfg.DisablePoller {
		if o.poller, err = poller.NewMulti(cfg.Poller); err != nil {
			return nil, cfgpath.Prefix("Poller", err)
		}
	}
	opts := cfg.setOptions()
	opts.refuse = o.refuse
	if o.set, err = newSet(ctx, opts, o.attach, o.detach); err != nil {
		return nil, errors.Join(err, disp.Close(ctx))
	}
	return o, nil
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = core.NopMetrics{}
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.Store.Logger == nil {
		c.Store.Logger = c.Logger
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Store.Now, c.Dispatcher.Now, c.Poller.Now = c.Now, c.Now, c.Now
	wiring.Inherit(&c.Dispatcher.Logger, &c.Dispatcher.Metrics, c.Logger, c.Metrics)
	wiring.Inherit(&c.Poller.Logger, &c.Poller.Metrics, c.Logger, c.Metrics)
	if c.Dispatcher.Observer == nil {
		c.Dispatcher.Observer = c.Observer
	}
	if c.Poller.Observer == nil {
		c.Poller.Observer = c.Observer
	}
	c.DrainTimeout = drainDefault(c.DrainTimeout, c.Dispatcher.Lease, dispatcher.DefaultLease)
	return c
}

func (c Config) setOptions() setOptions {
	return setOptions{what: "outbox", databases: c.Databases, discover: c.Discover, open: c.Open,
		route: c.Route, drain: c.DrainTimeout, refresh: c.RefreshInterval, log: c.Logger}
}

// validate reports every problem of c, before the defaults are applied
// (it checks that the parts' clocks are left unset).
func (c Config) validate() error {
	var p cfgpath.Collector
	c.setOptions().validate(&p)
	p.Logger("Logger", c.Logger)
	// Checked here, so that a typed nil is named by the field set (the
	// parts inherit them and would name their own).
	p.NilValue("Metrics", c.Metrics)
	p.NilValue("Observer", c.Observer)
	p.UnsetClock("Store.Now", c.Store.Now)
	p.UnsetClock("Dispatcher.Now", c.Dispatcher.Now)
	p.Add("Store", c.Store.Validate())
	p.Add("Dispatcher", c.Dispatcher.Validate())
	if !c.DisablePoller {
		p.UnsetClock("Poller.Now", c.Poller.Now)
		p.Add("Poller", c.Poller.Validate())
	}
	p.Add("Ordering", c.Ordering.Validate())
	return p.Err()
}

// attach builds the tenant of a newly opened database and hands its store
// to the dispatcher and the poller.
func (o *Outbox) attach(ctx context.Context, d Database, db *sqlx.DB) (*Tenant, error) {
	log := o.cfg.Logger.With(slog.String("store", d.ID))
	storeCfg := o.cfg.Store
	storeCfg.Logger = storeCfg.Logger.With(slog.String("store", d.ID))
	store, err := jdbcstore.New(db, storeCfg)
	if err != nil {
		return nil, cfgpath.Prefix("Store", err)
	}
	if !o.cfg.SkipSchema {
		if err := store.ApplySchema(ctx); err != nil {
			return nil, cfgpath.Prefix("Store", err) // Store.Table: not an outbox table
		}
	}
	if err := o.dispatcher.AddStore(d.ID, store); err != nil {
		return nil, err
	}
	q := handoff.Of(o.dispatcher, d.ID)
	t := &Tenant{id: d.ID, db: db, store: store, queue: q, open: engine.NewCounter(context.Background()),
		closed: func() bool { return o.set.isClosed() }, // o.set is nil during New's first apply
		tx: txctx.NewX(db, txctx.WithLogger(log),
			txctx.Option(txopts.Hooks(writegate.Of(db.DB), q.HotWaiting)))}
	if t.client, err = publish.New(store, q); err != nil {
		return nil, errors.Join(err, o.dispatcher.RemoveStore(ctx, d.ID))
	}
	t.client.SetOrdering(o.cfg.Ordering)
	t.client.Observer = o.cfg.Observer
	if o.poller != nil {
		if err := o.poller.Add(d.ID, store, o.dispatcher); err != nil {
			return nil, errors.Join(err, o.dispatcher.RemoveStore(ctx, d.ID))
		}
		id := d.ID
		wake := func() { handoff.WakeStore(o.poller, id) }
		o.listeners.add(id, notify.New(store, wake, log))
		handoff.Link(o.dispatcher, o.poller, id) // ordered keys move on, put-off events come back, when due
	}
	return t, nil
}

// refuse refuses the removal of database id (member val) asked from a
// listener of its own events, or from inside a transaction on it (the
// removal would wait for that listener or transaction, so for itself).
func (o *Outbox) refuse(ctx context.Context, id string, val any) error {
	if o.dispatcher.InListenerOf(ctx, id) {
		return dispatcher.ErrCloseInListener
	}
	if t, ok := val.(*Tenant); ok && t.inOwnTx(ctx) {
		return ErrRemoveInTx
	}
	return nil
}

// detach waits for the tenant's InTx calls under way, stops its
// notification listener and polling it, and waits until the dispatcher
// holds none of its events. (A removal asked from a listener of the
// tenant's own events never gets here: refuse.) An event committed after
// the store's removal began is released by the dispatcher through the
// database's pool, which the set closes right after: without the wait, a
// transaction open at the removal committed its events leased to this
// node, and the database's next owner waited the whole Lease for them.
func (o *Outbox) detach(ctx context.Context, id string, t *Tenant) error {
	var errOpen error
	if t != nil {
		errOpen = t.drainInTx(ctx)
	}
	errNotify := o.listeners.remove(ctx, id)
	if o.poller != nil {
		o.poller.Remove(id)
	}
	return errors.Join(errOpen, errNotify, o.dispatcher.RemoveStore(ctx, id))
}

// For returns the tenant a routing key maps to (the Database's ID, unless
// Config.Route maps it). An unknown key returns an *UnknownKeyError
// (errors.Is ErrUnknownKey); an empty one ErrInvalidKey. After Close every
// key is unknown, and the error also matches core.ErrClosed.
func (o *Outbox) For(key string) (*Tenant, error) { return o.set.get(key) }

// ForUUID is For with a UUID key, looked up in its canonical text form
// (see [UUIDKey]).
func (o *Outbox) ForUUID(key [16]byte) (*Tenant, error) { return o.set.get(UUIDKey(key)) }

// StoreIDs returns the ids of the databases in the set, sorted.
func (o *Outbox) StoreIDs() []string { return o.set.ids() }

// Refresh runs Config.Discover now and applies its result (see
// [RefreshResult]); without Discover it returns an error wrapping
// core.ErrInvalidConfig. It may run while events flow: new databases are
// served at once; removed ones stop being routed to and polled, finish
// what the dispatcher holds for them (bounded by DrainTimeout and ctx) and
// are closed.
func (o *Outbox) Refresh(ctx context.Context) (RefreshResult, error) {
	if ctx == nil {
		return RefreshResult{}, core.ErrNilContext
	}
	return o.set.refresh(ctx, o.cfg.Discover, 0)
}

// SetDatabases replaces the set of databases by dbs, like a refresh whose
// discovery returned dbs. An invalid list (duplicate or invalid ids, empty
// driver or DSN) changes nothing.
//
// Called with the context of a listener of a database it would remove or
// replace, it leaves that database in the set, served as before (the
// removal would wait for the caller), and returns an error wrapping
// dispatcher.ErrCloseInListener with the rest of the set applied: remove
// it from another goroutine. Called with the context of a transaction on
// such a database (inside its [Tenant.InTx], or adopted with
// [Tenant.Adopt]), it leaves it in the set the same way and returns an
// error wrapping [ErrRemoveInTx]. Refresh too.
func (o *Outbox) SetDatabases(ctx context.Context, dbs []Database) (RefreshResult, error) {
	if ctx == nil {
		return RefreshResult{}, core.ErrNilContext
	}
	return o.set.apply(ctx, dbs)
}

// Start starts the dispatcher, the poller and, with Discover, the
// periodic refresh. On every database that announces commits (PostgreSQL:
// see jdbcstore.Notifier) a listener then wakes the poll of that database
// whenever an event committed there without a hot path (a plain *sql.Tx,
// another node), so it is delivered within milliseconds instead of after
// Poller.Interval; databases joining the set later get theirs when they
// join. Each listener has a connection of its own to its database,
// besides the pool.
//
// Cancelling ctx after Start returned does not stop it: Close does.
func (o *Outbox) Start(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if err := o.dispatcher.Start(ctx); err != nil {
		return err
	}
	if o.poller != nil {
		handoff.FreshStart(o.poller) // rows published before Start are taken however recent (see outbox.Outbox.Start)
		if err := o.poller.Start(ctx); err != nil {
			return errors.Join(err, o.dispatcher.Close(ctx))
		}
		o.listeners.start()
	}
	o.set.startRefresh(o.cfg.Discover, o.cfg.RefreshInterval)
	return nil
}

// Close stops the refresh, refuses new InTx calls and waits for those
// under way (their events are delivered or released; not the caller's own
// when ctx carries one), stops the poller, lets the dispatcher finish what
// it holds until ctx expires, and closes every database. Undelivered
// events stay in their databases. When ctx expires while listeners still
// run, Close returns ctx's error then, and each database is closed once
// the last listener returned and its outcome was written (the events
// they hold keep their lease until then); calling Close again waits for
// that. Called from a listener with its context, Close returns
// dispatcher.ErrCloseInListener at once and stops nothing.
func (o *Outbox) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if o.dispatcher.InListener(ctx) {
		return dispatcher.ErrCloseInListener // before anything is stopped
	}
	errRefresh := o.set.stopRefresh(ctx)
	errOpen := o.drainOpen(ctx)
	errNotify := o.listeners.stop(ctx)
	var errPoller error
	if o.poller != nil {
		errPoller = o.poller.Close(ctx)
	}
	errDisp := o.dispatcher.Close(ctx)
	return engine.CloseErr(ctx, errRefresh, errOpen, errNotify, errPoller, errDisp, o.set.closeAfter(ctx, o.dispatcher.Close))
}

// drainOpen refuses new InTx calls on every database and waits, until ctx
// ends, for those under way, so that their events are delivered or
// released before the databases close (committed after, they stayed
// leased to this node until Lease). The caller's own transaction, when
// ctx carries one, is not waited for: it waits for Close.
func (o *Outbox) drainOpen(ctx context.Context) error {
	var errs []error
	for _, t := range o.set.vals() {
		if t.inOwnTx(ctx) {
			t.open.Close()
			continue
		}
		if err := t.drainInTx(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DispatcherStats returns what the shared dispatcher holds in memory now,
// over every database: queue lengths, events waiting on an in-process
// retry timer, payload and header bytes held. It reads no database.
func (o *Outbox) DispatcherStats() dispatcher.Stats { return o.dispatcher.Stats() }
