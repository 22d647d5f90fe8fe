package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/internal/inboxrow"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/retry"
)

// Defaults of [DispatcherConfig].
const (
	DefaultWorkers         = 4
	DefaultBatchSize       = 50
	DefaultLease           = 30 * time.Second
	DefaultPollInterval    = 500 * time.Millisecond
	DefaultMaxAttempts     = 10
	DefaultUnhandledDelay  = time.Minute
	DefaultReapInterval    = 30 * time.Second
	DefaultCleanupInterval = time.Hour
	DefaultRetention       = 30 * 24 * time.Hour
	DefaultCleanupBatch    = 500
	// DefaultDetachAfter is DispatcherConfig.DetachAfter's default. Claims
	// take a few milliseconds; one waiting for a lock, or on a database
	// that answers slowly, held up every other inbox's claims for as long
	// as it took, up to StatusTimeout.
	DefaultDetachAfter = 50 * time.Millisecond
	// MaxWorkers is the most Workers a DispatcherConfig may ask for.
	MaxWorkers = 10_000
	// MaxBatchSize is the largest BatchSize and CleanupBatch.
	MaxBatchSize = 10_000
	// defaultStatusTimeout caps the default StatusTimeout.
	defaultStatusTimeout = 5 * time.Second
)

// DispatcherConfig tunes a [Dispatcher]. The zero value takes every default.
type DispatcherConfig struct {
	// Owner is the dispatcher's owner token, written on every lease it
	// takes. Every outcome it writes is fenced on the claim: the owner and
	// the lease expiry that claim wrote, so the outcome of a handler that
	// outlived its lease changes nothing once the message was claimed
	// again, by another dispatcher or by this one. Unique among running
	// dispatchers; at most MaxOwnerLen bytes. Defaults to a new token
	// (host name + ULID).
	Owner string
	// Workers is how many handlers run at once. Defaults to 4; at most
	// MaxWorkers.
	Workers int
	// BatchSize is the most messages claimed at once; a claim never takes
	// more than the idle workers can start (a slow claim of one of several
	// inboxes, which runs beside the claim cycles, gives back at once what
	// the workers idle when it ends cannot start; see AddInbox). Defaults
	// to 50; at most MaxBatchSize.
	BatchSize int
	// Lease is how long a claimed message belongs to this dispatcher.
	// It must exceed HandlerTimeout + StatusTimeout, so only a handler
	// that ignores its ctx outlives it; its message may then be claimed
	// again, and its outcome is dropped (a WARN "lease lost").
	// Defaults to 30 s.
	Lease time.Duration
	// HandlerTimeout bounds each handler call through its ctx. Defaults to
	// half the Lease.
	HandlerTimeout time.Duration
	// StatusTimeout bounds each Ack/Abandon/Fail write. Defaults to a
	// quarter of the Lease, at most 5 s.
	StatusTimeout time.Duration
	// PollInterval is the pause once a claim found fewer messages than it
	// asked for in every inbox since the last full claim. After
	// a full claim the next one follows at once, and Enqueue on any of the
	// dispatcher's inboxes wakes it. It also wakes by itself when a
	// message it knows of becomes claimable: the next attempt of a message
	// it abandoned (after the Retry delay), and the DueAt of a message
	// enqueued in this process through one of its inboxes. A message made
	// claimable otherwise (abandoned or enqueued by another process, or
	// released by its reaper) is claimed at the first poll after it is
	// due, within PollInterval. Defaults to 500 ms.
	PollInterval time.Duration
	// Selector chooses the inbox of each claim cycle when the dispatcher
	// runs several (one per database, added with [Dispatcher.AddInbox]):
	// core.RoundRobin takes one batch from each inbox in turn,
	// core.DrainFirst stays on an inbox until a claim there comes back
	// empty, or a policy of your own. Defaults to core.RoundRobin{}. A nil
	// value of a selector type (a nil pointer) is refused; a selector that
	// panics gets round-robin order for that cycle, and the first panic is
	// logged at WARN.
	Selector core.Selector
	// DetachAfter is how long the claim loop of a dispatcher of several
	// inboxes waits for one inbox's claim before it goes on with the
	// others, the claim running on beside it and keeping its share of the
	// workers (at least one): an inbox waiting for a lock, or on a
	// database that answers slowly, does not hold up the other inboxes'
	// claims. The detached claim passes its inbox's turn, so the order a
	// Selector such as core.DrainFirst makes holds among the claims that
	// answered in time. Defaults to 50 ms; negative never detaches (the
	// loop waits for each claim, up to StatusTimeout, and the Selector's
	// order holds exactly).
	DetachAfter time.Duration
	// MaxAttempts is how many attempts make a message Dead: failed
	// handlings, and handlings that ended without an outcome (the
	// process died, or the handler outlived its lease), which the claim
	// charged. A message whose last attempt ended so is Dead at its next
	// claim without another run (ErrAttemptsExhausted). Defaults to 10.
	MaxAttempts int
	// UnhandledDelay is how long a message whose topic has no handler
	// waits before it is claimed again, for a handler added meanwhile (on
	// this node, or on another running newer code: this node does not
	// wake for it, so a node with the handler takes it at its next claim
	// cycle). No handler ran, so its attempt is not charged: it never goes
	// Dead for want of a handler. Defaults to DefaultUnhandledDelay (1 min).
	UnhandledDelay time.Duration
	// Retry is the delay before the next attempt given the failed
	// attempts so far. Defaults to the Inbox's Config.Backoff for
	// [Inbox.NewDispatcher], to [Backoff] for [NewMultiDispatcher]. A nil
	// value of a policy type (retry.PolicyFunc(nil)) is refused, and so is
	// a policy whose Validate method reports a problem (a
	// retry.Exponential with a negative delay); a policy that panics gets
	// retry.Exponential{}'s delay for that attempt.
	Retry retry.Policy
	// ReapInterval is how often expired leases are released.
	// Defaults to 30 s; negative disables.
	ReapInterval time.Duration
	// CleanupInterval is how often Done messages past Retention are
	// deleted, in every inbox, beside the claims (a long cleanup does not
	// hold them up). Defaults to 1 h; negative disables.
	CleanupInterval time.Duration
	// Retention is how long a Done message is kept after its last
	// sighting or its completion, whichever came later (Record.LastSeenAt).
	// Defaults to 30 days.
	Retention time.Duration
	// CleanupBatch is the most rows one cleanup statement deletes.
	// Defaults to 500; at most MaxBatchSize.
	CleanupBatch int
	// Logger receives the dispatcher's logs; a line about an inbox added
	// with AddInbox carries its id as the "store" attribute.
	// Defaults to the Inbox's Config.Logger for
	// [Inbox.NewDispatcher], to slog.Default() for [NewMultiDispatcher].
	Logger *slog.Logger
	// Observer traces and measures each handling of a message: its
	// handler gets the context the observer returns, and the outcome
	// (processed, retry, dead, unhandled, interrupted) ends it. Defaults
	// to the Inbox's Config.Observer for [Inbox.NewDispatcher]; nil
	// observes nothing.
	Observer core.InboxObserver
}

// withDefaults fills in the defaults; backoff and log are those of the
// dispatcher's Inbox, or of a dispatcher without one.
func (c DispatcherConfig) withDefaults(backoff retry.Policy, log *slog.Logger) DispatcherConfig {
	if c.Owner == "" {
		c.Owner = ident.OwnerToken()
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = c.Lease / 2
	}
	if c.StatusTimeout == 0 {
		c.StatusTimeout = min(defaultStatusTimeout, c.Lease/4)
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Retry == nil {
		c.Retry = backoff
	}
	if c.Selector == nil {
		c.Selector = core.RoundRobin{}
	}
	if c.UnhandledDelay == 0 {
		c.UnhandledDelay = DefaultUnhandledDelay
	}
	if c.DetachAfter == 0 {
		c.DetachAfter = DefaultDetachAfter
	}
	if c.ReapInterval == 0 {
		c.ReapInterval = DefaultReapInterval
	}
	if c.CleanupInterval == 0 {
		c.CleanupInterval = DefaultCleanupInterval
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.CleanupBatch == 0 {
		c.CleanupBatch = DefaultCleanupBatch
	}
	if c.Logger == nil {
		c.Logger = log
	}
	return c
}

// Validate reports every invalid field of c, after the defaults are
// applied, at once: each problem is a *core.ConfigError (wrapping
// core.ErrInvalidConfig) naming its field ("Workers"), joined with
// errors.Join. NewDispatcher and NewMultiDispatcher run it; tenant.NewInbox
// runs it before it opens any database, naming the fields
// "Dispatcher.Workers".
func (c DispatcherConfig) Validate() error { return c.withDefaults(Backoff{}, nil).validate() }

func (c DispatcherConfig) validate() error {
	var p cfgpath.Collector
	if err := checkOwner(c.Owner); err != nil {
		p.Field("Owner", err.Error())
	}
	p.Count("Workers", c.Workers, MaxWorkers)
	p.Count("BatchSize", c.BatchSize, MaxBatchSize)
	p.NilValue("Retry", c.Retry)
	p.Validated("Retry", c.Retry)
	p.NilValue("Selector", c.Selector)
	p.NilValue("Observer", c.Observer)
	p.Logger("Logger", c.Logger)
	c.validateTimeouts(&p)
	p.Duration("PollInterval", c.PollInterval)
	p.Duration("UnhandledDelay", c.UnhandledDelay)
	p.Duration("DetachAfter", max(c.DetachAfter, 0))         // negative: never
	p.Duration("ReapInterval", max(c.ReapInterval, 0))       // negative disables
	p.Duration("CleanupInterval", max(c.CleanupInterval, 0)) // negative disables
	p.AtLeast1("MaxAttempts", c.MaxAttempts)
	p.NotNegative("Retention", c.Retention)
	p.Count("CleanupBatch", c.CleanupBatch, MaxBatchSize)
	return p.Err()
}

// validateTimeouts records the problems of Lease, HandlerTimeout and
// StatusTimeout. A timeout left unset takes a share of Lease (a half, a
// quarter): when that share is too short, Lease is what is wrong, and it
// is reported instead of the field the caller never set.
func (c DispatcherConfig) validateTimeouts(p *cfgpath.Collector) {
	if msg := cfgpath.DurationProblem(c.Lease); msg != "" {
		p.Field("Lease", msg)
		return
	}
	derivedHandler := c.HandlerTimeout == c.Lease/2
	derivedStatus := c.StatusTimeout == min(defaultStatusTimeout, c.Lease/4)
	if (derivedHandler && c.HandlerTimeout < cfgpath.MinDuration) || (derivedStatus && c.StatusTimeout < cfgpath.MinDuration) {
		p.Field("Lease", fmt.Sprintf("(%v) is too short: HandlerTimeout and StatusTimeout, unless set, take a half and a quarter of it, each at least %v", c.Lease, cfgpath.MinDuration))
		return
	}
	if c.HandlerTimeout <= 0 {
		p.Field("HandlerTimeout", "must be positive")
	} else {
		p.Duration("HandlerTimeout", c.HandlerTimeout)
	}
	if c.StatusTimeout <= 0 {
		p.Field("StatusTimeout", "must be positive")
	} else {
		p.Duration("StatusTimeout", c.StatusTimeout)
	}
	if need := cfgpath.Sum(c.HandlerTimeout, c.StatusTimeout); c.Lease <= need {
		p.Field("Lease", fmt.Sprintf("(%v) must exceed HandlerTimeout + StatusTimeout (%v)", c.Lease, need))
	}
}

// Dispatcher runs the work queue of an [Inbox], or of several (one per
// database or tenant) with one pool of workers: it claims due messages with
// a lease, routes each to the handler of its topic, and
// acknowledges it, abandons it for a retry with backoff, or fails it (Dead)
// after MaxAttempts, always in the inbox the message came from. It also
// releases expired leases and deletes old Done messages, in every inbox.
// Several dispatchers, in one process or many, may share a table: leases
// keep every message with one of them at a time.
//
// Create it with [Inbox.NewDispatcher] for one inbox, or with
// [NewMultiDispatcher] and [Dispatcher.AddInbox] for several; add handlers
// with Handle, then Start; Close ends it. Each claim cycle takes messages
// from one inbox, chosen by DispatcherConfig.Selector. Its methods are safe
// for concurrent use.
type Dispatcher struct {
	cfg DispatcherConfig
	log *slog.Logger

	hmu      sync.RWMutex
	handlers map[string]Handler

	slots   chan struct{} // one token per busy worker
	run     *engine.Runner
	members engine.Set[*member]
	addMu   sync.Mutex // serializes adding members (one Inbox once)

	cycleMu  sync.Mutex // one claim at a time; guards rotation
	rotation *engine.Rotation

	alarm alarm // wakes the loop when a message it knows of is due

	wg sync.WaitGroup // handler goroutines
}

// NewDispatcher returns a dispatcher of in's work queue: a dispatcher of
// [NewMultiDispatcher] whose only inbox is in, with in's Config.Backoff and
// Config.Logger as defaults. Nothing runs until Start.
func (in *Inbox) NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	if cfg.Observer == nil {
		cfg.Observer = in.obs
	}
	d, err := newDispatcher(cfg.withDefaults(in.backoff, in.baseLog))
	if err != nil {
		return nil, err
	}
	if err := d.addMember("", in); err != nil {
		return nil, err
	}
	return d, nil
}

// NewMultiDispatcher returns a dispatcher without an inbox: add one per
// database with [Dispatcher.AddInbox] (before or after Start). Every inbox
// shares its workers, handlers and settings; Retry defaults to [Backoff]
// and Logger to slog.Default(). Nothing runs until Start.
func NewMultiDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	return newDispatcher(cfg.withDefaults(Backoff{}, slog.Default()))
}

func newDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With(slog.String("component", "outbox.inbox.dispatcher"), slog.String("owner", cfg.Owner))
	d := &Dispatcher{
		cfg:      cfg,
		log:      log,
		handlers: map[string]Handler{},
		slots:    make(chan struct{}, cfg.Workers),
		run:      engine.NewRunner("inbox dispatcher"),
		rotation: engine.NewRotation(cfg.Selector).WithLogger(log),
	}
	d.alarm.wake = d.Wake
	return d, nil
}

// Owner returns the dispatcher's owner token.
func (d *Dispatcher) Owner() string { return d.cfg.Owner }

// Handle sets the handler of topic (matched case-sensitively).
// One handler per topic: a second one returns ErrDuplicateHandler. Handlers
// may be added while the dispatcher runs. A nil h, or a nil value of a
// handler type (a nil HandlerFunc, a nil pointer), is refused with a
// *core.ConfigError: every message of the topic would fail in it.
func (d *Dispatcher) Handle(topic string, h Handler) error {
	if err := checkText("topic", topic, false, ErrEmptyTopic, ErrTopicTooLong); err != nil {
		return err
	}
	if h == nil {
		return &core.ConfigError{Field: "handler", Msg: fmt.Sprintf("for topic %q must not be nil", topic)}
	}
	if nilval.Is(h) {
		return &core.ConfigError{Field: "handler", Msg: fmt.Sprintf("for topic %q is a nil %T", topic, h)}
	}
	d.hmu.Lock()
	defer d.hmu.Unlock()
	if _, ok := d.handlers[topic]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateHandler, topic)
	}
	d.handlers[topic] = h
	return nil
}

// HandleFunc is Handle with a function.
func (d *Dispatcher) HandleFunc(topic string, fn func(ctx context.Context, msg Record) error) error {
	if fn == nil {
		return d.Handle(topic, nil)
	}
	return d.Handle(topic, HandlerFunc(fn))
}

func (d *Dispatcher) handler(topic string) Handler {
	d.hmu.RLock()
	defer d.hmu.RUnlock()
	return d.handlers[topic]
}

// Wake makes a running dispatcher claim now instead of at its next poll.
// It never blocks. Enqueue on any of its inboxes calls it.
func (d *Dispatcher) Wake() { d.run.Wake() }

// Start runs the dispatcher in the background until Close. It returns at
// once. Starting a running dispatcher is an error wrapping
// core.ErrInvalidConfig; starting a closed one returns core.ErrClosed.
//
// Cancelling ctx after Start returned does not stop it: Close does.
func (d *Dispatcher) Start(ctx context.Context) error {
	if err := d.run.Start(ctx, d.loop); err != nil { // a nil ctx: core.ErrNilContext
		return err
	}
	d.log.LogAttrs(ctx, slog.LevelDebug, "inbox dispatcher started", slog.Int("workers", d.cfg.Workers))
	return nil
}

// Close stops claiming and waits for the running handlers to finish and
// record their outcome; a reaping or cleanup under way is interrupted
// (each of its statements is atomic). When ctx ends first, the handlers' contexts are
// cancelled and ctx's error is returned; a handler interrupted that way
// (one that returns an error once its context ended; one that returns
// nil all the same has its message Done) records nothing and, once it
// returned, its lease and the attempt its
// claim charged are given back, so its message is claimed again at once
// by any dispatcher. Close waits up to StatusTimeout more for the
// cancelled handlers to return and give their messages back (a handler
// that ignores its context keeps its message until it returns, after
// Close).
// Calling Close again waits again. Close is final (Start then returns
// core.ErrClosed) and returns nil on a dispatcher that never started.
// Called with the context of one of d's handlers (or one derived from
// it), Close returns ErrCloseInHandler at once and closes nothing: it
// would wait for that handler, so for itself.
func (d *Dispatcher) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if d.InHandler(ctx) {
		return ErrCloseInHandler
	}
	d.alarm.stop()
	err := d.run.Close(ctx)
	if err != nil {
		// The handlers were cancelled: they get StatusTimeout to return
		// and give their messages back, so that a process exiting after
		// Close leaves none of them leased. (Close waits for the loop,
		// which waits for its handlers.)
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StatusTimeout)
		_ = d.run.Close(gctx)
		cancel()
	}
	// Closed for good: the inboxes stop notifying it of their enqueues
	// (and no longer keep it reachable).
	d.addMu.Lock()
	for _, m := range d.members.Members() {
		m.in.unregister(m)
	}
	d.addMu.Unlock()
	return err
}

// InHandler reports whether ctx is the context of a handler call of d, or
// derived from one.
func (d *Dispatcher) InHandler(ctx context.Context) bool {
	h, ok := handlingOf(ctx)
	return ok && h.m.d == d
}

// handlingOf returns the handler call ctx belongs to, if any.
func handlingOf(ctx context.Context) (*handling, bool) {
	if ctx == nil {
		return nil, false
	}
	h, ok := ctx.Value(handlerKey{}).(*handling)
	return h, ok
}

// maintenance is when an inbox was last reaped and cleaned up by a loop,
// and whether a reap of it runs.
type maintenance struct {
	reap, cleanup time.Time
	reaping       atomic.Bool
}

func (d *Dispatcher) loop(ctx context.Context, stop <-chan struct{}) {
	defer d.wg.Wait()
	last := map[*member]*maintenance{}
	// Reaping and cleanup are many short statements, each complete on its
	// own: Close interrupts them (a cleanup of a large backlog, or one
	// waiting for a row lock) instead of waiting for them.
	mctx, cancel := engine.UntilStop(ctx, stop)
	defer cancel()
	var cleaning atomic.Bool // a cleanup round runs
	d.run.Pace(ctx, stop, 0, func(ctx context.Context, _ bool) time.Duration {
		// Maintenance first (the first round of each inbox runs at once):
		// a restart releases the leases its previous run left behind.
		d.maintain(mctx, last, &cleaning)
		if d.cycle(ctx, mctx, stop) {
			return d.cfg.PollInterval
		}
		return 0
	})
}

// maintain starts a reap of every inbox whose interval has passed and
// that has none running (each reap is bounded by Lease), and a cleanup
// round of those whose cleanup interval has passed, unless one runs. Both
// run beside the claims: a cleanup of a large backlog, or a reap or a
// cleanup waiting for a lock or for a database that does not answer in
// one inbox, must not hold up the claims of every inbox.
func (d *Dispatcher) maintain(ctx context.Context, last map[*member]*maintenance, cleaning *atomic.Bool) {
	ms := d.members.Members()
	seen := make(map[*member]bool, len(ms))
	canClean := !cleaning.Load()
	var clean []*member
	for _, m := range ms {
		seen[m] = true
		if ctx.Err() != nil { // Close: no more maintenance
			break
		}
		l := last[m]
		if l == nil {
			l = &maintenance{}
			last[m] = l
		}
		if d.cfg.ReapInterval > 0 && l.reap.IsZero() && m.work.Hold() {
			// The first reap of an inbox comes before its first claim: a
			// restart releases the leases its previous run left behind.
			// It holds up the other inboxes' claims, so it is bounded by
			// StatusTimeout, not Lease (a database that does not answer
			// held every other inbox up 30 s); the later reaps, beside
			// the claims, finish what it could not.
			l.reap = time.Now()
			onMember(ctx, m, d.firstReap)
			m.work.Release()
		} else if d.cfg.ReapInterval > 0 && time.Since(l.reap) >= d.cfg.ReapInterval && !l.reaping.Load() && m.work.Hold() {
			// The later ones in a goroutine of their own, one at a time
			// per inbox: a reap waiting for a row lock or for a database
			// that does not answer (up to Lease) holds up no claim, of
			// this inbox or another.
			l.reap = time.Now()
			l.reaping.Store(true)
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer l.reaping.Store(false)
				defer m.work.Release()
				onMember(ctx, m, d.reap)
			}()
		}
		if canClean && d.cfg.CleanupInterval > 0 && time.Since(l.cleanup) >= d.cfg.CleanupInterval {
			l.cleanup = time.Now()
			clean = append(clean, m)
		}
	}
	for m := range last {
		if !seen[m] {
			delete(last, m)
		}
	}
	if len(clean) == 0 {
		return
	}
	cleaning.Store(true)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer cleaning.Store(false)
		for _, m := range clean {
			// Held only while its own cleanup runs: a removal of one inbox
			// does not wait for another's.
			if ctx.Err() == nil && m.work.Hold() {
				onMember(ctx, m, d.cleanup)
				m.work.Release()
			}
		}
	}()
}

// onMember runs fn on m with a child of ctx that also ends when m's
// removal begins.
func onMember(ctx context.Context, m *member, fn func(context.Context, *member)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.removing, cancel)()
	fn(ctx, m)
}

// cycle waits for an idle worker, claims as many messages as there are
// idle workers (at most BatchSize) from the inbox the rotation picks, and
// starts a handler goroutine for each. It reports whether the loop should
// rest: every inbox had a claim that was not full (a failed claim counts
// as such) since the last full one, and none was enqueued to since its
// last claim began. A claim of one of several inboxes that outlasts
// DetachAfter goes on beside the loop (see claim), which does not rest.
func (d *Dispatcher) cycle(ctx, probeCtx context.Context, stop <-chan struct{}) (rest bool) {
	select {
	case d.slots <- struct{}{}:
	case <-stop:
		return false
	}
	limit := 1
fill:
	for limit < d.cfg.BatchSize {
		select {
		case d.slots <- struct{}{}:
			limit++
		default:
			break fill
		}
	}
	c := d.claim(ctx, probeCtx, limit, d.cfg.StatusTimeout)
	if c.kept > 0 { // detached
		// The claim keeps its share of the workers while it runs: the
		// other inboxes' claims take the rest meanwhile.
		for range limit - c.kept {
			<-d.slots
		}
		return false
	}
	for range limit - len(c.recs) {
		<-d.slots
	}
	if c.m == nil {
		return c.rest
	}
	d.start(ctx, c.m, c.recs, c.err)
	return c.rest
}

// start starts a handler goroutine for each of recs, claimed from m, each
// holding a worker slot the caller took and a hold of m; a claim that
// failed with err is logged. After a hard stop that came while the claim
// ran (the claim itself is not cut short: the server may have committed
// it) the messages are given back instead, with the attempts the claim
// charged.
func (d *Dispatcher) start(ctx context.Context, m *member, recs []Record, err error) {
	if ctx.Err() != nil && len(recs) > 0 {
		d.releaseRest(m, recs, "the dispatcher stopped while it claimed")
		for range recs {
			m.work.Release()
			<-d.slots
		}
		return
	}
	if err != nil && ctx.Err() == nil {
		m.cycleLog.Hit(m.log, slog.LevelError, "inbox: claim failed; will try again at its next turn", slog.String("error", err.Error()))
	}
	for _, rec := range recs {
		d.wg.Add(1)
		go func() {
			defer func() { <-d.slots; d.wg.Done() }()
			defer m.work.Release()
			d.handle(ctx, m, rec)
		}()
	}
}

// claimed is a claim cycle's result: the inbox claimed from (nil: none),
// the messages, whether the loop may rest, the claim's error, and, for a
// claim that goes on beside the loop (detached: it owns what it claims),
// the worker slots it keeps.
type claimed struct {
	m    *member
	recs []Record
	rest bool
	err  error
	kept int // the worker slots a detached claim keeps (at least 1); 0: not detached
}

// claim claims up to limit messages from the inbox the rotation picks,
// bounding the query by timeout (none when 0). The member is held once
// per returned record; the caller unholds after each handling. m is nil
// when there is no inbox (rest is then true). With a timeout (the loop's
// claims) and several inboxes, the turn of an inbox whose claims failed
// lately is passed (passTurn; probeCtx bounds its probes), and so is that
// of an inbox whose claim still runs; a claim that outlasts DetachAfter
// goes on beside the loop (detached), which returns: it keeps its share
// of the worker slots reserved for it, and when it ends the messages it got
// start on those and on the workers idle then, and the rest are given
// back at once (finishDetached).
func (d *Dispatcher) claim(ctx, probeCtx context.Context, limit int, timeout time.Duration) claimed {
	d.cycleMu.Lock()
	defer d.cycleMu.Unlock()
	m, ids, wasPending := d.pick()
	// The turn of an inbox whose claim still runs (the loop is woken when
	// it ends), or whose last claims failed, goes to the next one the
	// Selector picks (a lone inbox whose claims fail is claimed from at
	// every turn); when every pick was passed so, the loop rests until
	// woken. Returning after one pass made the loop spin while a
	// Selector kept picking that inbox.
	for passed := 0; m != nil && timeout > 0 && (m.claiming.Load() || (len(ids) > 1 && d.passTurn(probeCtx, m))); passed++ {
		// No claim begins: an enqueue that pick's reset would hide still
		// counts (see anyPending).
		if wasPending {
			m.pending.Store(true)
		}
		d.rotation.Done(m.id, 0, false, ids)
		m.work.Release()
		if passed+1 >= len(ids) {
			return claimed{rest: true}
		}
		m, ids, wasPending = d.pick()
	}
	if m == nil {
		// No inbox, or the one picked was just removed: rest only when
		// there is none at all.
		return claimed{rest: len(ids) == 0}
	}
	held := true // pick's hold of m, given back here unless detached
	defer func() {
		if held {
			m.work.Release()
		}
	}()
	several := timeout > 0 && len(ids) > 1 && d.cfg.DetachAfter > 0
	qctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		// The dispatcher's own claim is bounded by timeout, not cut short
		// by a hard stop: a claim cancelled after the server committed it
		// would leave its messages leased, their attempts charged, until
		// the lease expired (the caller gives them back).
		qctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), timeout)
	}
	began := time.Now()
	if !several {
		defer cancel()
		recs, err := m.in.Claim(qctx, d.cfg.Owner, d.cfg.Lease, limit)
		d.record(ctx, m, recs, err, time.Since(began), timeout > 0)
		rest, _ := d.rotation.Done(m.id, len(recs), err == nil && len(recs) == limit, ids)
		return claimed{m: m, recs: recs, rest: rest && !d.anyPending(), err: err}
	}
	type result struct {
		recs []Record
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	m.claiming.Store(true)
	go func() {
		recs, err := m.in.Claim(qctx, d.cfg.Owner, d.cfg.Lease, limit)
		done <- result{recs, err, time.Since(began)}
	}()
	timer := time.NewTimer(d.cfg.DetachAfter)
	defer timer.Stop()
	select {
	case r := <-done:
		cancel()
		m.claiming.Store(false)
		d.record(ctx, m, r.recs, r.err, r.took, true)
		rest, _ := d.rotation.Done(m.id, len(r.recs), r.err == nil && len(r.recs) == limit, ids)
		return claimed{m: m, recs: r.recs, rest: rest && !d.anyPending(), err: r.err}
	case <-timer.C:
	}
	// Slow: the loop goes on with the other inboxes. m stays held (by
	// pick's hold) until the claim ended and its messages are settled.
	// The claim keeps its share of the workers it reserved (the others go
	// back to the loop): with none, the loop took every worker freed
	// meanwhile, and a busy inbox beside it left the slow one's messages
	// none, claim after claim.
	held = false
	d.rotation.Done(m.id, 0, false, ids) // the Selector's turn moves on
	keep := max(1, limit/len(ids))
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		r := <-done
		cancel()
		d.finishDetached(ctx, m, r.recs, r.err, limit, keep, r.took)
	}()
	return claimed{m: m, kept: keep}
}

// record records a claim of m that got recs or failed with err in took:
// its failure in m's skip (timed: the loop's claims), and one hold of m
// per message.
func (d *Dispatcher) record(ctx context.Context, m *member, recs []Record, err error, took time.Duration, timed bool) {
	if timed {
		// A failure skips the inbox's next turns for a while: a database
		// that does not answer costs each claim StatusTimeout, which held
		// up the claims of every other inbox turn after turn.
		m.skip.Record(err != nil && ctx.Err() == nil, took)
	}
	m.work.Add(len(recs))
}

// finishDetached settles a claim of m that went on beside the loop,
// holding kept worker slots: it records it (without making m the
// Selector's last inbox: the loop went on), starts the messages it got on
// those workers and on the others idle now, gives the rest back at once
// (their leases and the attempts the claim charged: any dispatcher claims
// them again, this one when a worker is free), frees the slots it kept
// and did not use, and wakes the loop. Then it releases pick's hold of m.
func (d *Dispatcher) finishDetached(ctx context.Context, m *member, recs []Record, err error, limit, kept int, took time.Duration) {
	defer m.work.Release()
	d.record(ctx, m, recs, err, took, true)
	n := min(kept, len(recs))
	for range kept - n {
		<-d.slots
	}
take:
	for n < len(recs) && ctx.Err() == nil {
		select {
		case d.slots <- struct{}{}:
			n++
		default:
			break take
		}
	}
	// A claim that gives messages back found its inbox anything but
	// drained, however few it got: counted as drained, an empty claim of
	// the other inboxes then let the loop rest for PollInterval while
	// those messages waited, claimable.
	full := err == nil && (len(recs) == limit || n < len(recs))
	d.cycleMu.Lock()
	d.rotation.Settle(m.id, len(recs), full, d.members.IDs())
	d.cycleMu.Unlock()
	m.claiming.Store(false)
	// Its handlers start first, as a claim of the loop's starts them: a
	// release waited for first (a statement on the database that was
	// slow) took from their lease up to StatusTimeout.
	rest := recs[n:]
	d.start(ctx, m, recs[:n], err)
	if len(rest) > 0 {
		why := "a slow claim ended with more messages than idle workers"
		if ctx.Err() != nil {
			why = "the dispatcher stopped while it claimed"
		}
		d.releaseRest(m, rest, why)
		for range rest {
			m.work.Release()
		}
	}
	d.Wake()
}

// RunOnce claims up to BatchSize messages from one inbox (the next one the
// Selector picks; the only one for [Inbox.NewDispatcher]) and handles them
// one after the other in the calling goroutine, with ctx as the handlers'
// parent context. It returns how many it handled.
//
// The messages share one lease, taken by the claim. Before each handler,
// RunOnce checks on the inbox's clock (Config.Now) that the lease still
// covers HandlerTimeout + StatusTimeout; once it does not, it releases
// that message and the rest, giving back the attempts their claim charged
// (any dispatcher claims them again at once), and returns. So it may run
// while dispatchers run (leases keep them apart); it is meant for tests
// and tools.
//
// A handler that calls runtime.Goexit has its failed attempt recorded and
// ends the calling goroutine; the messages after it are released, as
// above.
func (d *Dispatcher) RunOnce(ctx context.Context) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	c := d.claim(ctx, nil, d.cfg.BatchSize, 0)
	m, recs, err := c.m, c.recs, c.err
	if err != nil || m == nil {
		return 0, err
	}
	held, next := len(recs), 0 // member holds to give back; recs[next:] not started
	defer func() {
		if next < len(recs) { // a handler's Goexit ends this goroutine
			d.releaseRest(m, recs[next:], "RunOnce: a handler called runtime.Goexit")
		}
		for ; held > 0; held-- {
			m.work.Release()
		}
	}()
	for next < len(recs) {
		if !d.leaseCovers(m, recs[next]) {
			handled := next
			d.releaseRest(m, recs[next:], "RunOnce: the lease no longer covers a handler and its outcome")
			next = len(recs)
			return handled, nil
		}
		rec := recs[next]
		next++ // a Goexit in the handler settles rec itself
		d.handle(ctx, m, rec)
		m.work.Release()
		held--
	}
	return len(recs), nil
}

// leaseCovers reports whether rec's lease, on its inbox's clock, outlasts
// a handler started now and the write of its outcome. A worker of the
// dispatcher's loop starts each message it claimed at once (a claim takes
// no more messages than there are idle workers; a slow claim's messages
// start as soon as it ended, or are given back), so only RunOnce, which
// runs its batch one after the other, needs to ask.
func (d *Dispatcher) leaseCovers(m *member, rec Record) bool {
	return !rec.LockedUntil.Before(m.in.now().Add(d.cfg.HandlerTimeout + d.cfg.StatusTimeout))
}

// releaseRest hands back the leases (and the attempts) of claimed
// messages that will not be handled (RunOnce's rest, a claim that
// returned during a hard stop), because of why, bounded by
// StatusTimeout. They share the claim's lease. If it fails, they are
// claimed again once their lease expires.
func (d *Dispatcher) releaseRest(m *member, recs []Record, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StatusTimeout)
	defer cancel()
	keys := make([]Key, len(recs))
	for i, rec := range recs {
		keys[i] = rec.Key()
	}
	n, err := m.in.release(ctx, d.claimOf(recs[0]), keys) // one claim took them all
	if err != nil {
		m.log.LogAttrs(ctx, slog.LevelWarn,
			"inbox: "+why+"; cannot release the remaining messages, they are claimed again when their lease expires",
			slog.Int("messages", len(recs)), slog.String("error", err.Error()))
		return
	}
	m.log.LogAttrs(ctx, slog.LevelInfo,
		"inbox: "+why+"; the remaining messages are released, any dispatcher claims them at once",
		slog.Int("messages", len(recs)), slog.Int("released", n))
}

// claimOf returns the claim under which the dispatcher holds rec: its
// owner token and the lease expiry the claim wrote, on which every
// outcome of rec's handling is fenced (see inboxrow.Lease), so that a
// handling that outlived its lease cannot settle a later claim of the
// same message by this dispatcher.
func (d *Dispatcher) claimOf(rec Record) inboxrow.Lease {
	return inboxrow.Lease{Owner: d.cfg.Owner, Until: rec.LockedUntil}
}

// handle runs the handler of one claimed message and records the outcome.
// Its context ends at a hard stop or when RemoveInbox gives up waiting for
// m, and carries m and the message's key (see StoreID, FromContext and
// ProcessTx).
func (d *Dispatcher) handle(ctx context.Context, m *member, rec Record) {
	h := &handling{m: m, key: rec.Key(), claim: d.claimOf(rec)}
	ctx, cancel := context.WithCancel(context.WithValue(ctx, handlerKey{}, h))
	defer cancel()
	defer context.AfterFunc(m.work.Context(), cancel)()
	var (
		err       error
		noHandler bool
		took      time.Duration
		ran       bool // the handler was called
	)
	// The claim charged the attempt. One over MaxAttempts means the
	// attempts are used up: the last one ended without an outcome (its
	// process died, or its handler outlived the lease), or MaxAttempts was
	// lowered since. The message is Dead without another run, and this
	// claim, which runs nothing, does not count.
	attempt, exhausted := rec.Attempt, rec.Attempt > d.cfg.MaxAttempts
	if exhausted {
		attempt--
	}
	end := func(core.InboxOutcome, error, time.Duration, bool) {}
	if obs := d.cfg.Observer; obs != nil {
		var done func(core.InboxResult)
		ctx, done = observeInbox(ctx, obs, core.InboxMessage{
			Source: rec.Source, MessageID: rec.MessageID, Topic: rec.Topic, Store: m.id,
			// An exhausted claim reports the attempt it charged (one over
			// MaxAttempts): it is no handling, first or not.
			Mode: core.InboxQueued, Attempt: rec.Attempt, Enqueued: enqueued(rec),
			Redelivered: strings.HasPrefix(rec.LastError, ErrNoHandler.Error()),
		}, m.log, m.observerLog)
		end = func(o core.InboxOutcome, err error, took time.Duration, ran bool) {
			done(core.InboxResult{Outcome: o, Err: err, Took: took, NotRun: !ran})
		}
	}
	hd := d.handler(rec.Topic)
	switch {
	case exhausted && attempt == d.cfg.MaxAttempts:
		err = fmt.Errorf("%w: %d attempts of %d made, the last without an outcome (its process died, or its handler outlived the lease)",
			ErrAttemptsExhausted, attempt, d.cfg.MaxAttempts)
	case exhausted:
		err = fmt.Errorf("%w: %d attempts made, more than MaxAttempts (%d)", ErrAttemptsExhausted, attempt, d.cfg.MaxAttempts)
	case rec.DecodeErr != nil:
		err = rec.DecodeErr
	case hd == nil:
		noHandler = true
		err = fmt.Errorf("%w %q", ErrNoHandler, rec.Topic)
		m.noHandlerLog.Hit(m.log, slog.LevelWarn, rec.Topic,
			"inbox: no handler for the topic; its messages are put off for a handler added later (UnhandledDelay, no attempt charged)",
			recAttrs(rec, slog.String("topic", rec.Topic))...)
	default:
		m.log.LogAttrs(ctx, slog.LevelDebug, "inbox: handling message", recAttrs(rec, slog.String("topic", rec.Topic))...)
		hctx, cancel := context.WithTimeout(ctx, d.cfg.HandlerTimeout)
		var p *engine.Panic
		start := time.Now()
		ran = true
		p, err = engine.Guard(func() error { return hd.Handle(hctx, rec) }, func() { d.goexited(ctx, h, rec, time.Since(start), end) })
		took = time.Since(start)
		cancel()
		if p != nil {
			err = p.Err(ErrHandlerPanic)
			m.log.LogAttrs(context.Background(), slog.LevelError, "inbox: handler panicked",
				recAttrs(rec, slog.String("topic", rec.Topic), slog.String("panic_type", fmt.Sprintf("%T", p.Value)), slog.String("stack", string(p.Stack)))...)
		}
	}
	if err != nil && ctx.Err() != nil {
		// Interrupted by a hard stop or an abandoned removal: no attempt
		// is charged, and the lease is handed back (the handler has
		// returned), so any dispatcher claims the message again at once.
		d.release(h, rec)
		end(core.InboxInterrupted, err, took, ran)
		return
	}
	end(d.settle(h, rec, attempt, err, noHandler, exhausted), err, took, ran)
}

// goexited records the failed attempt of a handler that called
// runtime.Goexit: the goroutine is unwinding and cannot be stopped, but
// the outcome is written (or, after a hard stop, the lease is released,
// as for any interrupted handler) before it ends. The dispatcher's worker
// slot is given back by the goroutine's own deferred calls.
func (d *Dispatcher) goexited(ctx context.Context, h *handling, rec Record, took time.Duration, end func(core.InboxOutcome, error, time.Duration, bool)) {
	m := h.m
	m.log.LogAttrs(context.Background(), slog.LevelError,
		"inbox: handler called runtime.Goexit instead of returning (as t.FailNow and require.* do); the handling failed",
		recAttrs(rec, slog.String("topic", rec.Topic), slog.String("stack", string(debug.Stack())))...)
	if ctx.Err() != nil {
		d.release(h, rec) // as for a handler that returned: no attempt charged
		end(core.InboxInterrupted, ErrHandlerGoexit, took, true)
		return
	}
	end(d.settle(h, rec, rec.Attempt, ErrHandlerGoexit, false, false), ErrHandlerGoexit, took, true)
}

// settle records the outcome of one handling in its inbox, fenced on its
// claim: Ack, Abandon with backoff, or Fail at MaxAttempts, attempt being
// the attempt that ended (the one the claim charged). exhausted: the
// claim found the attempts used up and ran no handler; the Fail gives its
// attempt back. Status writes outlive a hard stop (they are short and
// bounded by StatusTimeout). It returns the outcome decided, for the
// observer.
func (d *Dispatcher) settle(h *handling, rec Record, attempt int, herr error, noHandler, exhausted bool) core.InboxOutcome {
	m := h.m
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StatusTimeout)
	defer cancel()
	keys := []Key{rec.Key()}
	var (
		n   int
		err error
		op  string
	)
	var decided core.InboxOutcome
	outcome, delay := engine.Decide(herr, attempt, d.cfg.MaxAttempts, d.cfg.Retry)
	// The handler's failure is logged before the write, as the outcome is
	// decided: the write is what others see (a test, an operator reading
	// the row). Unless the handler's ProcessTx marked the message Done
	// first: the write then tells whether that committed (nothing failed)
	// or not (logged after it).
	handlerMarked := h.marked.Load()
	failed := func(op string) {
		switch op {
		case "fail":
			msg := "inbox: handler failed; message is Dead after its last attempt"
			if exhausted {
				msg = "inbox: message is Dead: its attempts are used up, the last without an outcome (its process died, or its handler outlived the lease); handler not run again"
			}
			m.log.LogAttrs(ctx, slog.LevelError, msg,
				recAttrs(rec, slog.String("topic", rec.Topic), slog.Int("attempts", attempt), slog.String("error", herr.Error()))...)
		case "abandon":
			m.log.LogAttrs(ctx, slog.LevelWarn, "inbox: handler failed; will retry",
				recAttrs(rec, slog.String("topic", rec.Topic), slog.Int("attempts", attempt), slog.String("error", herr.Error()),
					slog.Duration("retry_in", delay))...)
		}
	}
	switch {
	case noHandler: // never Dead for want of a handler
		// No handler ran: the attempt is given back.
		// No alarm: the message is for a node that has the handler, which
		// this one, woken exactly when it comes due, would beat to it
		// every time; this node looks again at its next claim cycle.
		op, decided, delay = "put off", core.InboxUnhandled, d.cfg.UnhandledDelay
		n, err = m.in.putOff(ctx, h.claim, keys, herr.Error(), delay)
	case outcome == engine.Done:
		op, decided = "ack", core.InboxProcessed
		n, err = m.in.ack(ctx, h.claim, keys)
	case outcome == engine.Dead:
		op, decided = "fail", core.InboxDead
		if !handlerMarked {
			failed(op)
		}
		n, err = m.in.fail(ctx, h.claim, keys, herr.Error(), exhausted)
	default:
		op, decided = "abandon", core.InboxRetry
		if !handlerMarked {
			failed(op)
		}
		n, err = m.in.abandonAfter(ctx, h.claim, keys, herr.Error(), delay)
		if err == nil && n > 0 {
			d.alarm.at(time.Now().Add(delay)) // the next attempt, without waiting for a poll
		}
	}
	if handlerMarked && (op == "fail" || op == "abandon") {
		if err == nil && n == 0 {
			decided = core.InboxProcessed // its ProcessTx committed it Done: nothing failed
		} else {
			failed(op)
		}
	}
	switch {
	case err != nil:
		m.statusLog.Hit(m.log, slog.LevelError, "inbox: cannot record the outcome; the message is retried when its lease expires",
			recAttrs(rec, slog.String("op", op), slog.String("error", err.Error()))...)
	case n == 0 && op == "ack" && handlerMarked:
		// The handler's ProcessTx marked the message Done under its lease.
	case n == 0 && handlerMarked:
		// The handler's ProcessTx committed the message Done, then the
		// handler failed: no lease was lost, and nothing is retried.
		m.log.LogAttrs(ctx, slog.LevelInfo,
			"inbox: the handler failed after its ProcessTx committed the message Done; it stays Done and is not handled again",
			recAttrs(rec, slog.String("op", op), slog.String("error", herr.Error()))...)
	case n == 0:
		m.lostLog.Hit(m.log, slog.LevelWarn,
			"inbox: lease lost before the outcome was recorded (it expired, and the message was reaped or claimed again, by this dispatcher or another); the outcome is dropped; increase Lease",
			recAttrs(rec, slog.String("op", op))...)
	}
	return decided
}

// release hands back the lease (and the attempt) of a message whose
// handler a shutdown interrupted, fenced on its claim, bounded by
// StatusTimeout (it outlives the hard stop). If it fails, the message is
// claimed again once its lease expires.
func (d *Dispatcher) release(h *handling, rec Record) {
	m := h.m
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StatusTimeout)
	defer cancel()
	n, err := m.in.release(ctx, h.claim, []Key{rec.Key()})
	switch {
	case err != nil:
		m.log.LogAttrs(ctx, slog.LevelWarn,
			"inbox: handler interrupted by shutdown (or by the removal of its inbox); cannot release its lease, the message is claimed again when it expires",
			recAttrs(rec, slog.String("error", err.Error()))...)
	default:
		m.log.LogAttrs(ctx, slog.LevelInfo,
			"inbox: handler interrupted by shutdown (or by the removal of its inbox); its lease is released, the message is claimed again at once",
			recAttrs(rec, slog.Int("released", n))...)
	}
}

// reap releases m's expired leases (maintain's reaping, every
// ReapInterval), bounded by Lease.
func (d *Dispatcher) reap(ctx context.Context, m *member) { d.reapLogged(ctx, m, d.cfg.Lease) }

// firstReap is an inbox's first reap, before its first claim: bounded by
// StatusTimeout (the loop waits for it).
func (d *Dispatcher) firstReap(ctx context.Context, m *member) {
	d.reapLogged(ctx, m, min(d.cfg.Lease, d.cfg.StatusTimeout))
}

// reapLogged reaps m within timeout, logging a failing reaping at WARN
// once per incident (at DEBUG after that) and its recovery, as the
// outbox's poller does.
func (d *Dispatcher) reapLogged(ctx context.Context, m *member, timeout time.Duration) {
	if _, err := d.reapWithin(ctx, m, timeout); ctx.Err() == nil { // stopping: no incident
		m.reaping.Report(m.log, err, "inbox: reaping expired leases failed; will try again every ReapInterval (logged once until it recovers)",
			"inbox: reaping expired leases failed again", "inbox: reaping expired leases recovered")
	}
}

// reapWithin releases m's expired leases within timeout and returns how
// long it took. A claim of m that ran beside the reap skipped the rows the
// reap held locked (SKIP LOCKED), some of them claimable, and may rest
// now: after a success m is claimed from again before the next rest (the
// database answered: its claims are no longer skipped either).
func (d *Dispatcher) reapWithin(ctx context.Context, m *member, timeout time.Duration) (time.Duration, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	n, err := m.in.ReapExpired(qctx)
	took := time.Since(began)
	if err != nil {
		return took, err
	}
	if n > 0 {
		m.log.LogAttrs(ctx, slog.LevelInfo, "inbox: released expired leases", slog.Int("messages", n))
	}
	m.notify()
	return took, nil
}

// cleanup deletes m's Done messages past Retention.
func (d *Dispatcher) cleanup(ctx context.Context, m *member) {
	n, err := m.in.Cleanup(ctx, d.cfg.Retention, d.cfg.CleanupBatch)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		m.log.LogAttrs(ctx, slog.LevelWarn, "inbox: cleanup failed; will try again", slog.String("error", err.Error()))
	case n > 0:
		m.log.LogAttrs(ctx, slog.LevelInfo, "inbox: deleted Done messages past retention", slog.Int("messages", n),
			slog.Duration("retention", d.cfg.Retention))
	}
}

func recAttrs(rec Record, extra ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{slog.String("source", rec.Source), slog.String("message_id", rec.MessageID)}, extra...)
}

// enqueued is when rec's message could first be handled, for
// core.InboxMessage.Enqueued: when it was first stored, or its DueAt when
// later (a delay asked for is not a wait in the inbox).
func enqueued(rec Record) time.Time {
	if rec.DueAt.After(rec.FirstSeenAt) {
		return rec.DueAt
	}
	return rec.FirstSeenAt
}
