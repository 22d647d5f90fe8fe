// Package dispatcher runs listeners for outbox events on a bounded worker
// pool fed by two bounded queues: hot (events whose transaction just
// committed) and cold (events found by the poller, and in-process retries).
//
// Workers prefer the hot queue with a plain select, so a committed event is
// picked up microseconds after commit. Listeners run synchronously, which
// gives natural backpressure: when they are slow the queues fill, an
// event handed over after its commit is refused, and it waits in the
// database for the poller.
// Nothing held in memory is ever the only copy of an event.
package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/inflight"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/internal/ratelog"
)

// Source tells where a queued event came from.
type Source uint8

// The queue sources.
const (
	SourceHot   Source = iota // enqueued after commit
	SourceCold                // enqueued by the poller
	SourceRetry               // an in-process retry whose delay elapsed
)

// String returns "hot", "cold", "retry", or Source(n) for another value.
func (s Source) String() string {
	switch s {
	case SourceHot:
		return "hot"
	case SourceCold:
		return "cold"
	case SourceRetry:
		return "retry"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

type item struct {
	env      core.Envelope
	attempts int // failed deliveries so far
	source   Source
	// redelivered: the event was handed to listeners before, as its row
	// told (core.Delivery.Redelivered; a retry says so by its attempts).
	// (Beside source: the two share a word, which keeps item, copied
	// onto the heap by each listener call's watchdog, in its size class.)
	redelivered bool
	lease       time.Time // end of this node's lease on the row; zero: unowned
	src         *origin   // the store the event came from; outcomes go there
	// gen is the tracker's generation of the acquisition this item
	// holds: its outcome is written only while it is current (see
	// settling).
	gen uint64
	// seq is the event's position among the events of its ordering key
	// when a claim read it (core.Record.OrderSeq); 0 for an unordered
	// event or one from the hot path.
	seq int64
	// committed is when the event's transaction committed as far as this
	// process knows (core.Delivery.Committed).
	committed time.Time
	// attempt is the observation of the attempt under way: the listeners'
	// context and the Observer's end (nil without an Observer).
	attempt *attempt
}

// attempt is one delivery attempt as the Observer sees it.
type attempt struct {
	ctx     context.Context           // the listeners' parent context
	end     func(core.DeliveryResult) // guarded: see observe
	started time.Time
}

// observed reports the attempt's outcome to the Observer, once.
func (it item) observed(o core.Outcome, err error) {
	if a := it.attempt; a != nil && a.end != nil {
		end := a.end
		a.end = nil
		r := core.DeliveryResult{Outcome: o, Err: err}
		if o != core.OutcomeUnhandled { // else no listener ran
			r.Listeners = time.Since(a.started)
		}
		end(r)
	}
}

// path is the Observer's name of the item's source.
func (it item) path() core.Path {
	switch it.source {
	case SourceCold:
		return core.PathCold
	case SourceRetry:
		return core.PathRetry
	}
	return core.PathHot
}

// Dispatcher delivers events to listeners and records the outcome. Create
// it with [New], call [Dispatcher.Start], and [Dispatcher.Close] when done.
// Its methods are safe for concurrent use.
type Dispatcher struct {
	cfg       Config
	def       *origin // the store given to New; nil for NewMulti
	listeners core.ListenerSource
	log       *slog.Logger
	metrics   core.Metrics
	tracker   *inflight.Tracker
	batcher   *doneBatcher

	hot  chan item
	cold chan item
	// intakeMu is held for reading by a hand-off from its last look at
	// closed to its send on a queue, and for writing by Close while it
	// sets closed: an event handed over is on its queue before the
	// workers are told to drain, or refused, never left on a queue no
	// worker reads any more with its row leased to this node.
	intakeMu sync.RWMutex
	// coldMu serializes the senders to the cold queue (offerCold), so
	// that a room check followed by a send cannot block.
	coldMu sync.Mutex
	// hotWaiting counts events handed to the hot queue that no worker has
	// taken yet (queued, or handed to a worker that was woken but has not
	// run yet), and the places reserved for events about to be sent (see
	// enqueueHot); see hotWaitingNow.
	hotWaiting atomic.Int64
	// released counts the events let go without an outcome (release):
	// their rows wait, leased by this node, for its poller
	// (handoff.ReleaseCounter).
	released atomic.Uint64
	// room holds the pollers' notices waiting for room in the cold
	// queue (room.go).
	room roomNotices
	// workers counts the running worker goroutines, a replaced hung one
	// included until its listener returns (test hook: LiveWorkers).
	workers atomic.Int32

	started  atomic.Bool
	closed   atomic.Bool
	stopping chan struct{} // closed by Close: drain and exit
	hardStop chan struct{} // closed when Close's ctx expires: exit now
	runCtx   context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	done     chan struct{} // closed when every worker has exited, the DONE writes flushed and the leases released
	out      chan struct{} // closed when every worker has exited

	closeOnce, hardOnce sync.Once
	lifeMu              sync.Mutex // serializes Start with Close

	retryMu     sync.Mutex
	retryTimers map[*time.Timer]item // timer → the event it holds

	// hung holds, for each call the watchdog abandoned whose listener has
	// not returned yet, what its outcome left to do once it returns (see
	// park). Made when first needed.
	hungMu sync.Mutex
	hung   map[*callWatch]parked
	// watchLate, when set (by tests), is given how late the watchdog of a
	// call fired and returns the lateness it acts on (see watch).
	watchLate func(late time.Duration) time.Duration
	// keeping is true while a goroutine renews the leases of hung
	// calls' retries (keepHungLeases); guarded by hungMu.
	keeping bool

	stores engine.Set[*origin] // added with AddStore

	heldBytes  atomic.Int64    // payload bytes held; see MaxHeldBytes
	timerBytes atomic.Int64    // those of events waiting on a timer (written under retryMu)
	payloadEst atomic.Int64    // moving average of payload sizes offered
	noListener *ratelog.PerKey // event types warned about
}

// New returns a dispatcher writing outcomes to store and reading listeners
// from listeners. It does not start any goroutine.
func New(store core.StatusWriter, listeners core.ListenerSource, cfg Config) (*Dispatcher, error) {
	if nilval.Is(store) { // a nil *T too: it would panic at the first status write
		return nil, &core.ConfigError{Field: "dispatcher store", Msg: "must not be nil"}
	}
	d, err := newDispatcher(listeners, cfg)
	if err != nil {
		return nil, err
	}
	d.def = newOrigin(d, "", store)
	return d, nil
}

// NewMulti returns a dispatcher for several stores (one per database or
// tenant) sharing its workers, queues and listeners: add each store with
// [Dispatcher.AddStore]. It does not start any goroutine.
func NewMulti(listeners core.ListenerSource, cfg Config) (*Dispatcher, error) {
	return newDispatcher(listeners, cfg)
}

func newDispatcher(listeners core.ListenerSource, cfg Config) (*Dispatcher, error) {
	if nilval.Is(listeners) { // a nil *T too: it would panic at the first delivery
		return nil, &core.ConfigError{Field: "dispatcher listeners", Msg: "must not be nil"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{
		cfg:         cfg,
		listeners:   listeners,
		log:         cfg.Logger.With(slog.String("component", "outbox.dispatcher")),
		metrics:     cfg.Metrics,
		tracker:     inflight.New(cfg.InFlightTTL, cfg.Now),
		hot:         make(chan item, cfg.HotCapacity),
		cold:        make(chan item, cfg.ColdCapacity),
		stopping:    make(chan struct{}),
		hardStop:    make(chan struct{}),
		runCtx:      ctx,
		cancel:      cancel,
		done:        make(chan struct{}),
		out:         make(chan struct{}),
		retryTimers: make(map[*time.Timer]item),
		noListener:  ratelog.NewPerKey(ratelog.DefaultMaxKeys, 5*time.Second),
	}
	d.markListenerContexts() // see close_guard.go
	d.batcher = newDoneBatcher(d)
	return d, nil
}

// Start launches the workers and returns. Events enqueued before Start wait
// in the queues. Starting twice, or after Close, returns an error.
//
// Cancelling ctx after Start returned does not stop it: Close does.
func (d *Dispatcher) Start(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	d.lifeMu.Lock()
	defer d.lifeMu.Unlock()
	if d.closed.Load() {
		return core.ErrClosed
	}
	if !d.started.CompareAndSwap(false, true) {
		return &core.ConfigError{Field: "dispatcher", Msg: "already started"}
	}
	d.startWorkers(d.cfg.Workers)
	go d.batcher.run()
	go func() {
		d.wg.Wait()
		close(d.out)
		close(d.batcher.in) // no worker adds any more: flush the rest
		<-d.batcher.done
		// Every outcome is written: hand back the leases of what was
		// not delivered (bounded by StatusTimeout; Close waits for it
		// only until its ctx ends).
		d.releaseLeases(context.Background())
		close(d.done)
	}()
	d.log.LogAttrs(ctx, slog.LevelDebug, "dispatcher started", slog.Int("workers", d.cfg.Workers))
	return nil
}

// Owner returns this dispatcher's owner token.
func (d *Dispatcher) Owner() string { return d.cfg.Owner }

// hotLease is the lease of an event published through this dispatcher: it
// is owned by it from the insert until Lease after it is due. Once the
// dispatcher is closed it is the zero (unowned) lease, so an event
// published after Close is free for any node's poller at once. A delayed
// event that no timer could hold now (RetryCapacity, MaxHeldBytes) is
// owned until it is due only: its row is then any claim's, this node's
// included, which leaves out the rows of its own live leases while it
// holds events (they would otherwise wait until Lease after they were
// due).
func (d *Dispatcher) hotLease(env core.Envelope) core.Lease {
	if d.closed.Load() {
		return core.Lease{}
	}
	now := d.cfg.Now()
	if nb := env.NotBefore(); nb.After(now) {
		if !d.timerFree(heldSize(env)) {
			return core.Lease{Owner: d.cfg.Owner, Until: nb}
		}
		return core.Lease{Owner: d.cfg.Owner, Until: nb.Add(d.cfg.Lease)}
	}
	return core.Lease{Owner: d.cfg.Owner, Until: now.Add(d.cfg.Lease)}
}

// claimLease is the lease the poller claims rows with: this dispatcher's
// owner until Lease from now.
func (d *Dispatcher) claimLease(now time.Time) core.Lease {
	return core.Lease{Owner: d.cfg.Owner, Until: now.Add(d.cfg.Lease)}
}

// enqueueHot offers an event of o whose transaction has committed,
// inserted with lease. It never blocks: when the hot queue is full, when its
// payload does not fit in MaxHeldBytes, or when the dispatcher is closed, it
// returns false, counts a HotDropped and the event stays in the database
// for the poller (this node re-takes it at once, its lease
// notwithstanding; after Close, or once its store is being removed, the
// lease is released so that any node does). An event already held by this dispatcher is not queued
// twice (true is returned: it is being handled). An event whose lease is
// not this dispatcher's (unowned or another node's) is refused without
// counting a drop. A delayed event (NotBefore in the future) waits on a
// timer, within RetryCapacity, or is left to the poller.
func (d *Dispatcher) enqueueHot(o *origin, env core.Envelope, lease core.Lease) bool {
	if o == nil {
		return false
	}
	if d.closed.Load() || o.work.Closed() {
		o.metrics.HotDropped()
		if lease.Owner == d.cfg.Owner {
			d.releaseLate(o)
		}
		return false
	}
	if lease.Owner != d.cfg.Owner {
		// Inserted unowned or for another node: every status write of
		// this node would be fenced off, so a delivery here would only
		// be repeated. The poller (of the owner) delivers it.
		return false
	}
	res, gen := d.acquire(o, env)
	switch res {
	case refused:
		d.releaseLate(o)
		return false
	case held:
		return !o.work.Closed() // held already: it is being handled
	case overBudget:
		o.metrics.HotDropped()
		d.warnOverBudget(o, env)
		return false
	}
	it := item{env: env, source: SourceHot, lease: lease.Until, src: o, gen: gen, committed: d.cfg.Now()}
	if wait := env.NotBefore().Sub(d.cfg.Now()); wait > 0 {
		if d.schedule(it, wait) {
			o.metrics.HotEnqueued()
			return true
		}
		d.release(it)
		return false // the poller delivers it when due
	}
	// Closed since the look above: the workers may have drained the queue
	// and exited already (see intakeMu), so the event is not sent.
	d.intakeMu.RLock()
	if d.closed.Load() {
		d.intakeMu.RUnlock()
		d.release(it)
		o.metrics.HotDropped()
		d.releaseLate(o)
		return false
	}
	defer d.intakeMu.RUnlock() // after the send deferred below
	// A place in the queue is taken first: hotWaiting counts the events
	// sent and not yet taken by a worker (it is decremented after the
	// receive), so while it stays within the capacity the send below has
	// room and cannot block. The event is counted before it is sent:
	// whoever sees it delivered sees it counted.
	if d.hotWaiting.Add(1) > int64(cap(d.hot)) {
		d.hotWaiting.Add(-1)
		d.release(it)
		o.metrics.HotDropped()
		o.logs.drop.Hit(o.log, slog.LevelWarn, "hot queue full: event left in the database for the poller",
			slog.String("event_id", env.ID()), slog.Int("hot_capacity", d.cfg.HotCapacity))
		return false
	}
	// Sent even should the count panic (a Metrics of the user's): the
	// place is taken, the event held.
	defer func() { d.hot <- it }()
	o.metrics.HotEnqueued()
	return true
}

// enqueueCold offers an event of o the poller claimed until leaseUntil,
// with the number of failed deliveries so far and whether its row tells
// that it was delivered before. It never blocks; false means the cold
// queue is full, the event's payload does not fit in MaxHeldBytes, the
// event is already held, or the dispatcher is closed.
func (d *Dispatcher) enqueueCold(o *origin, env core.Envelope, attempts int, leaseUntil, created time.Time, mark uint64, seq int64, redelivered bool) bool {
	if o == nil || d.closed.Load() {
		return false
	}
	res, gen := d.acquireClaimed(o, env, mark)
	if res != acquired {
		return false
	}
	it := item{env: env, attempts: attempts, source: SourceCold, lease: leaseUntil, src: o, gen: gen, committed: created, seq: seq,
		redelivered: redelivered}
	if !d.offerCold(it, true) {
		d.release(it)
		return false
	}
	return true
}

// offerCold puts it on the cold queue unless the queue is full. With
// count, ColdEnqueued is counted before the send: a worker may deliver the
// event, and its DONE row be seen, the moment it is on the queue, and
// whoever sees that must see it counted too.
func (d *Dispatcher) offerCold(it item, count bool) bool {
	d.intakeMu.RLock() // see intakeMu
	defer d.intakeMu.RUnlock()
	d.coldMu.Lock()
	defer d.coldMu.Unlock()
	if d.closed.Load() || len(d.cold) == cap(d.cold) {
		return false
	}
	if count {
		it.src.metrics.ColdEnqueued()
	}
	d.cold <- it // cannot block: only senders fill it, and they hold coldMu
	return true
}

// coldRoom returns how many more events the cold queue can take now. With
// a MaxHeldBytes budget it is also at most how many events of the recent
// average payload size still fit in the budget (see coldBudgetRoom), so
// the poller neither reads nor leases rows it could not enqueue.
func (d *Dispatcher) coldRoom() int {
	room := cap(d.cold) - len(d.cold)
	if b := d.coldBudgetRoom(); b >= 0 {
		room = min(room, b)
	}
	return room
}

// Stats is what a dispatcher holds in memory at one moment.
type Stats struct {
	// Hot and Cold are the lengths of the hot queue (events from
	// commits) and of the cold queue (events the poller claimed).
	Hot, Cold int
	// Retries is how many events wait on an in-process timer (retries
	// and delayed events).
	Retries int
	// HeldBytes is the payload and header bytes (see Config.MaxHeldBytes) of the events held (queued, waiting
	// on a timer, running or waiting for their DONE write), which
	// Config.MaxHeldBytes bounds.
	HeldBytes int64
}

// Stats returns what the dispatcher holds in memory now, over every store.
func (d *Dispatcher) Stats() Stats {
	return Stats{Hot: len(d.hot), Cold: len(d.cold), Retries: d.pendingRetries(), HeldBytes: d.heldBytes.Load()}
}

// queueDepths returns the current lengths of the hot and cold queues.
func (d *Dispatcher) queueDepths() (hot, cold int) { return len(d.hot), len(d.cold) }

// hotWaitingNow reports whether an event handed to the hot queue has not been
// taken by a worker yet: it is queued, or a worker was woken for it but has
// not run yet. outbox.New and tenant.New make their transaction managers
// consult it before each BEGIN, so a goroutine that commits transaction
// after transaction lets the delivery worker its commit woke run first.
//
// Why: an after-commit hook that hands an event to an idle worker makes the
// worker runnable on the committing goroutine's processor. If that
// goroutine goes straight into its next transaction while the other
// processors are busy (other writers, or the garbage collector's idle
// worker, which does not look at other processors' queues), the worker
// waits until the goroutine blocks: milliseconds instead of microseconds.
func (d *Dispatcher) hotWaitingNow() bool { return d.hotWaiting.Load() > 0 }

// Close stops intake (the hot path's and the poller's hand-offs are
// refused), cancels pending
// in-process retries and lets the workers drain the queues. If ctx expires
// first, listener contexts are cancelled (the listeners get ListenerGrace
// to return), queued events are left to the database, and ctx's error is
// returned; calling Close again waits again. Concurrent calls share one
// shutdown: the first ctx to end interrupts the listeners for all of
// them, and the others return nil once the workers stopped.
// Events not delivered stay NEW/RETRY in the database.
//
// Once the workers stopped, Close hands back the leases this dispatcher's
// Owner holds on NEW/RETRY rows in every store it serves (through
// core.LeaseReleaser, which jdbcstore implements), so another node, or
// this process restarted, delivers those events at once rather than after
// Lease: events dropped from a full hot queue, left queued, waiting on a
// retry timer or published just before Close. Rows of events still held
// (a listener that ignores its cancelled ctx, one hung past ListenerGrace
// included, or a DONE write in progress) keep their lease; they are
// released when their worker exits. Each release statement is bounded by
// StatusTimeout (and by ctx while the workers are being waited for); the
// stores are released together. When ctx ends first, the cancelled
// listeners get ListenerGrace to return (the leases of the events of
// those that did are released too), then the DONE writes of the listeners
// that succeeded and the release of what no worker holds share one
// StatusTimeout, so Close returns at most ListenerGrace + StatusTimeout
// after ctx ended. A release that let rows go or kept some is logged at
// INFO with their numbers. A dispatcher must therefore not share its Owner with another
// running dispatcher.
//
// Close waits for the listener calls, so a listener must not call it on
// its own goroutine: with the listener's ctx (or one derived from it) it
// returns [ErrCloseInListener] at once and closes nothing; with another
// ctx it waits until that ctx ends. Call it from a new goroutine instead.
func (d *Dispatcher) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if d.InListener(ctx) {
		return ErrCloseInListener
	}
	d.closeOnce.Do(func() {
		d.lifeMu.Lock() // not concurrently with Start
		defer d.lifeMu.Unlock()
		d.intakeMu.Lock() // no hand-off between its look at closed and its send
		d.closed.Store(true)
		d.intakeMu.Unlock()
		// The timers' events leave the tracker before the workers are
		// told to stop: the release after the last worker exits would
		// otherwise find them still held, and keep their leases.
		d.cancelRetries(nil)
		close(d.stopping)
		if !d.started.Load() {
			// Never started: nothing runs, release what was queued.
			d.hardOnce.Do(func() { close(d.hardStop); d.cancel() })
			n := d.discard()
			d.logDiscarded(n)
			d.releaseLeases(ctx)
			close(d.done)
		}
	})
	if err := engine.Wait(ctx, d.done); err == nil { // finished: nil even for a done ctx
		d.cancel()
		return nil
	}
	hard := false
	d.hardOnce.Do(func() { close(d.hardStop); d.cancel(); hard = true })
	if hard {
		// Write now the DONE of the events whose listeners succeeded
		// (the batcher would wait out DoneFlushWindow, or the last
		// worker), and release what no worker holds (the queues are
		// emptied first), both bounded by StatusTimeout; the rest is
		// released when the last worker exits.
		d.logDiscarded(d.discard())
		// The listeners just cancelled get ListenerGrace to return, so
		// that the leases of their events are released below rather
		// than when the last worker exits, in the background (lost if
		// the process exits after Close).
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ListenerGrace)
		_ = engine.Wait(gctx, d.out)
		gcancel()
		// One StatusTimeout for both: the release waits for the DONE
		// writes (on SQLite, for the write gate they hold), and a write
		// begun late would not end sooner (SQLite's busy wait does not
		// heed its context): Close ran up to four StatusTimeouts late.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StatusTimeout)
		d.batcher.flushPending(hctx)
		d.releaseLeasesWithin(hctx)
		cancel()
	}
	return ctx.Err()
}

// startWorkers launches n more workers.
func (d *Dispatcher) startWorkers(n int) {
	d.wg.Add(n)
	for range n {
		go d.worker()
	}
}

// worker takes events until Close. A worker whose listener hangs past its
// grace or calls runtime.Goexit is replaced by a new one (see call), so the
// pool keeps Workers goroutines taking events.
func (d *Dispatcher) worker() {
	d.workers.Add(1)
	defer d.wg.Done()
	defer d.workers.Add(-1)
	for {
		var it item
		// Hot first: take a hot event whenever one is waiting.
		select {
		case it = <-d.hot:
			d.hotWaiting.Add(-1)
		default:
			select {
			case it = <-d.hot:
				d.hotWaiting.Add(-1)
			case it = <-d.cold:
				d.checkRoom()
			case <-d.stopping:
				d.drain()
				return
			}
		}
		if !d.process(it) {
			return // a replacement took over from this hung worker
		}
	}
}

// drain processes what is queued until both queues are empty or a hard stop.
func (d *Dispatcher) drain() {
	for {
		select {
		case <-d.hardStop:
			d.logDiscarded(d.discard())
			return
		default:
		}
		var it item
		select {
		case it = <-d.hot:
			d.hotWaiting.Add(-1)
		case it = <-d.cold:
		default:
			return
		}
		if !d.process(it) {
			return
		}
	}
}

// discard empties the queues, releasing their events; it returns how many.
func (d *Dispatcher) discard() int {
	n := 0
	for {
		select {
		case it := <-d.hot:
			d.hotWaiting.Add(-1)
			d.release(it)
		case it := <-d.cold:
			d.release(it)
		default:
			return n
		}
		n++
	}
}

func (d *Dispatcher) logDiscarded(n int) {
	if n > 0 {
		d.log.Info("dispatcher stopped with queued events; they stay in the database for the poller", slog.Int("events", n))
	}
}
