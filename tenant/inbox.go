package tenant

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/engine"
)

// InboxConfig configures [NewInbox]. Databases or Discover names the
// databases (Discover when both are set); everything else has a default.
type InboxConfig struct {
	// Databases is the static set of databases. With Discover it is
	// ignored, not even checked: the first discovery names the set
	// NewInbox starts with. Without Discover, nil is refused (no set was
	// named), while an empty, non-nil set is meaningful: the inbox starts
	// with no database, and [Inbox.SetDatabases] adds them.
	Databases []Database
	// Discover returns the current set of databases (dynamic discovery).
	// NewInbox calls it once (an error fails NewInbox), then
	// every RefreshInterval while the inbox runs; [Inbox.Refresh] calls it
	// now.
	Discover Discovery
	// RefreshInterval is the pause between discoveries. Defaults to 5 min;
	// negative: only [Inbox.Refresh] discovers.
	RefreshInterval time.Duration
	// Open opens a database of the set. Defaults to [Open].
	Open OpenFunc
	// Route maps a routing key to a store id. Defaults to the identity:
	// the routing key is the Database's ID.
	Route func(key string) string
	// DrainTimeout bounds how long a database that left the set may take
	// to finish its running handlers before it is closed; handlers still
	// running then are cancelled and their messages are handled again once
	// the database returns. The removal then waits up to the dispatcher's
	// StatusTimeout more, for the cancelled handlers to return and their
	// leases to be released before the database closes (see
	// inbox.Dispatcher.RemoveInbox). Defaults to the dispatcher's Lease.
	DrainTimeout time.Duration
	// Inbox is the configuration of every database's inbox.Inbox (table
	// name, error length, backoff, schema, clock). Dialect, when nil, is
	// detected per database; Logger defaults to this Config's and gets
	// the database's id as the "store" attribute.
	Inbox inbox.Config
	// Dispatcher configures the one dispatcher (workers, lease, retries)
	// shared by every database. Its Selector (core.RoundRobin by default,
	// or core.DrainFirst) orders the databases' claim cycles; Retry
	// defaults to Inbox.Backoff, Observer to Inbox.Observer (a handling
	// carries its database's id as core.InboxMessage.Store), Logger to
	// this Config's.
	Dispatcher inbox.DispatcherConfig
	// Logger is the default logger of every part. Defaults to slog.Default().
	Logger *slog.Logger
}

// Inbox is the inbox over several databases: a
// router to each database's inbox.Inbox (see [Inbox.For]) and
// one work-queue dispatcher, with one pool of workers and one set of topic
// handlers, over all of them. Create it with [NewInbox]; it is safe for
// concurrent use.
type Inbox struct {
	dispatcher *inbox.Dispatcher

	cfg InboxConfig
	set *set[*inbox.Inbox]
}

// NewInbox opens the databases of cfg.Databases (or of a first discovery),
// creates each one's inbox table unless cfg.Inbox.SkipSchema, and adds
// each inbox to one dispatcher. Nothing runs until [Inbox.Start]. A
// database that cannot be opened fails NewInbox.
//
// NewInbox validates the whole cfg before it opens any database and
// reports every problem at once: an error joining one *core.ConfigError
// per invalid field (errors.Is core.ErrInvalidConfig), each named by its
// path from InboxConfig, such as "Dispatcher.Workers" or "Inbox.Table"
// (the last also errors.Is core.ErrInvalidIdentifier).
func NewInbox(ctx context.Context, cfg InboxConfig) (*Inbox, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	disp, err := inbox.NewMultiDispatcher(cfg.Dispatcher)
	if err != nil {
		return nil, cfgpath.Prefix("Dispatcher", err)
	}
	ib := &Inbox{dispatcher: disp, cfg: cfg}
	opts := cfg.setOptions()
	opts.refuse = ib.refuse
	if ib.set, err = newSet(ctx, opts, ib.attach, ib.detach); err != nil {
		return nil, err
	}
	return ib, nil
}

func (c InboxConfig) withDefaults() InboxConfig {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.Inbox.Logger == nil {
		c.Inbox.Logger = c.Logger
	}
	if c.Dispatcher.Logger == nil {
		c.Dispatcher.Logger = c.Logger
	}
	if c.Dispatcher.Observer == nil {
		c.Dispatcher.Observer = c.Inbox.Observer
	}
	if c.Dispatcher.Retry == nil && c.Inbox.Backoff != nil {
		c.Dispatcher.Retry = c.Inbox.Backoff
	}
	c.DrainTimeout = drainDefault(c.DrainTimeout, c.Dispatcher.Lease, inbox.DefaultLease)
	return c
}

func (c InboxConfig) setOptions() setOptions {
	return setOptions{what: "inbox", databases: c.Databases, discover: c.Discover, open: c.Open,
		route: c.Route, drain: c.DrainTimeout, refresh: c.RefreshInterval, log: c.Logger}
}

// validate reports every problem of c at once, before the defaults are
// applied (a part's problem is reported once, under its own path).
func (c InboxConfig) validate() error {
	var p cfgpath.Collector
	c.setOptions().validate(&p)
	p.Logger("Logger", c.Logger)
	p.Add("Inbox", c.Inbox.Validate())
	p.Add("Dispatcher", c.Dispatcher.Validate())
	return p.Err()
}

// attach builds the inbox of a newly opened database and adds it to the
// dispatcher.
func (ib *Inbox) attach(ctx context.Context, d Database, db *sqlx.DB) (*inbox.Inbox, error) {
	cfg := ib.cfg.Inbox
	cfg.Logger = cfg.Logger.With(slog.String("store", d.ID))
	if cfg.Observer != nil {
		cfg.Observer = storeObserver{InboxObserver: cfg.Observer, store: d.ID}
	}
	in, err := inbox.New(ctx, db, cfg)
	if err != nil {
		return nil, err
	}
	if err := ib.dispatcher.AddInbox(d.ID, in); err != nil {
		return nil, err
	}
	return in, nil
}

// refuse refuses the removal of database id asked from a handler of its
// own messages (it would wait for that handler, so for itself).
func (ib *Inbox) refuse(ctx context.Context, id string, _ any) error {
	if ib.dispatcher.InHandler(ctx) && inbox.StoreID(ctx) == id {
		return inbox.ErrCloseInHandler
	}
	return nil
}

// detach stops claiming from the database's inbox and waits for its
// running handlers.
func (ib *Inbox) detach(ctx context.Context, id string, _ *inbox.Inbox) error {
	return ib.dispatcher.RemoveInbox(ctx, id)
}

// For returns the inbox of the database a routing key maps to (the
// Database's ID, unless InboxConfig.Route maps it): use
// it to Enqueue, Process or check messages of that tenant. An unknown key
// returns an *UnknownKeyError (errors.Is ErrUnknownKey); an empty
// one ErrInvalidKey. The inbox stays usable until its database leaves the
// set; after that its database is closed and every call fails. After
// Close every key is unknown, and the error also matches core.ErrClosed.
func (ib *Inbox) For(key string) (*inbox.Inbox, error) { return ib.set.get(key) }

// ForUUID is For with a UUID key, looked up in its canonical text form
// (see [UUIDKey]).
func (ib *Inbox) ForUUID(key [16]byte) (*inbox.Inbox, error) { return ib.set.get(UUIDKey(key)) }

// StoreIDs returns the ids of the databases in the set, sorted.
func (ib *Inbox) StoreIDs() []string { return ib.set.ids() }

// Refresh runs InboxConfig.Discover now and applies its result (see
// [RefreshResult]); without Discover it returns an error
// wrapping core.ErrInvalidConfig. It may run while messages flow: new
// databases are served at once; removed ones stop being routed to and
// claimed from, finish their running handlers (bounded by DrainTimeout
// and ctx, then up to StatusTimeout more for cancelled handlers to give
// their leases back) and are closed; unchanged ones are left alone.
func (ib *Inbox) Refresh(ctx context.Context) (RefreshResult, error) {
	if ctx == nil {
		return RefreshResult{}, core.ErrNilContext
	}
	return ib.set.refresh(ctx, ib.cfg.Discover, 0)
}

// SetDatabases replaces the set of databases by dbs, like a refresh whose
// discovery returned dbs. An invalid list (duplicate or invalid ids, empty
// driver or DSN) changes nothing.
//
// Called with the context of a handler of a database it would remove or
// replace, it leaves that database in the set, served as before (the
// removal would wait for the caller), and returns an error wrapping
// inbox.ErrCloseInHandler with the rest of the set applied: remove it from
// another goroutine. Refresh too.
func (ib *Inbox) SetDatabases(ctx context.Context, dbs []Database) (RefreshResult, error) {
	if ctx == nil {
		return RefreshResult{}, core.ErrNilContext
	}
	return ib.set.apply(ctx, dbs)
}

// Handle sets the handler of a topic, for every database (see
// inbox.Dispatcher.Handle: a nil handler, or a nil value of a handler
// type, is refused with a *core.ConfigError). The handler learns its
// message's database from inbox.StoreID(ctx) and inbox.FromContext(ctx).
func (ib *Inbox) Handle(topic string, h inbox.Handler) error { return ib.dispatcher.Handle(topic, h) }

// HandleFunc is Handle with a function.
func (ib *Inbox) HandleFunc(topic string, fn func(ctx context.Context, msg inbox.Record) error) error {
	return ib.dispatcher.HandleFunc(topic, fn)
}

// Start starts the dispatcher and, with Discover, the periodic refresh.
//
// Cancelling ctx after Start returned does not stop it: Close does.
func (ib *Inbox) Start(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if err := ib.dispatcher.Start(ctx); err != nil {
		return err
	}
	ib.set.startRefresh(ib.cfg.Discover, ib.cfg.RefreshInterval)
	return nil
}

// Close stops the refresh, stops the dispatcher (its running handlers
// record their outcome unless ctx expires first) and closes every
// database. Messages not handled yet stay in their databases. When ctx
// expires while handlers still run, Close returns ctx's error then, and
// each database is closed once the last handler returned and its lease
// was handed back (see inbox.Dispatcher.Close); calling Close again waits
// for that. Called from a handler with its context, Close returns
// inbox.ErrCloseInHandler at once and closes nothing.
func (ib *Inbox) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if ib.dispatcher.InHandler(ctx) {
		return inbox.ErrCloseInHandler // before anything is stopped
	}
	errRefresh := ib.set.stopRefresh(ctx)
	errDisp := ib.dispatcher.Close(ctx)
	return engine.CloseErr(ctx, errRefresh, errDisp, ib.set.closeAfter(ctx, ib.dispatcher.Close))
}

// storeObserver reports a tenant inbox's transactional processings
// (ProcessTx, Process) with the database's id as their store, as the
// dispatcher reports its queued ones, so that one database's processings
// are not counted with every other's under store "".
type storeObserver struct {
	core.InboxObserver
	store string
}

// ProcessInbox sets m.Store when it is empty.
func (o storeObserver) ProcessInbox(ctx context.Context, m core.InboxMessage) (context.Context, func(core.InboxResult)) {
	if m.Store == "" {
		m.Store = o.store
	}
	return o.InboxObserver.ProcessInbox(ctx, m)
}
