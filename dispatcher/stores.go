package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/internal/ratelog"
	"github.com/outbox-go/outbox/internal/wiring"
)

// MaxStoreIDLen is the longest store identifier [Dispatcher.AddStore]
// accepts: 128 bytes.
const MaxStoreIDLen = ident.MaxStoreIDLen

// origin is one store the dispatcher delivers events from: the store given
// to New (id "") or one added with AddStore. Items carry their origin, so
// every status write goes back to the store the event came from.
type origin struct {
	id      string
	store   core.StatusWriter
	log     *slog.Logger
	metrics core.Metrics

	// freed, when set, is called after ordered events of this store
	// finished (DONE, or DEAD under the skip policy): the next event of
	// their keys may be claimable now. The wiring sets it to the store's
	// poller (handoff.Successors).
	freed atomic.Pointer[func([]core.OrderPos)]

	// putOff, when set, is called with the time an event put off comes
	// due again; the wiring sets it to the store's poller
	// (handoff.WakeAt).
	putOff atomic.Pointer[func(time.Time)]

	// successors is store as a core.SuccessorClaimer (it claims the next
	// event of a key by position), or nil.
	successors core.SuccessorClaimer

	// work counts the events held (queued, running, waiting on a timer or
	// for their DONE write); closed once the store is removed. Its
	// Context, a child of the dispatcher's run context, is the parent of
	// the store's listener contexts: RemoveStore cancels it when it gives
	// up waiting.
	work *engine.Counter
	// timers counts the events of work waiting on a timer (see
	// handoff.TimerReporter); changed under the dispatcher's retryMu.
	timers atomic.Int64

	// logs rate-limits the store's recurring lines: one store's incident
	// neither hides another's nor counts its occurrences.
	logs originLogs
}

// originLogs are the rate limiters of one store's recurring log lines.
type originLogs struct {
	drop, status, lease, stale, hung, budget, superseded, observer, release *ratelog.Limiter
}

func newOriginLogs() originLogs {
	const every = 5 * time.Second
	return originLogs{
		drop: ratelog.New(every), status: ratelog.New(every), lease: ratelog.New(every), stale: ratelog.New(every),
		hung: ratelog.New(every), budget: ratelog.New(every), superseded: ratelog.New(every), observer: ratelog.New(every),
		release: ratelog.New(every),
	}
}

func newOrigin(d *Dispatcher, id string, store core.StatusWriter) *origin {
	o := &origin{id: id, store: store, log: d.log, metrics: d.metrics, logs: newOriginLogs()}
	// The store's listener contexts carry o, so RemoveStore recognizes a
	// call from one of them.
	o.work = engine.NewCounter(context.WithValue(d.runCtx, originKey{}, o))
	o.successors, _ = store.(core.SuccessorClaimer)
	if id != "" {
		o.log = d.log.With(slog.String("store", id))
		o.metrics = wiring.MetricsForStore(d.metrics, id)
	}
	return o
}

// originKey marks the listener contexts of a store's events; its value is
// the store's origin.
type originKey struct{}

// StoreID returns the id of the store whose event the listener given ctx
// (or a context derived from it) is delivering: the id given to AddStore
// in a dispatcher of several stores (a database's id in a tenant set),
// "" for the store of a dispatcher made by New, and "" for a context that
// is no listener's.
func StoreID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	if o, ok := ctx.Value(originKey{}).(*origin); ok {
		return o.id
	}
	return ""
}

// keyFreed calls the freed hook, if any, with after (nil: a full claim).
func (o *origin) keyFreed(after []core.OrderPos) {
	if fn := o.freed.Load(); fn != nil {
		(*fn)(after)
	}
}

// key is the in-flight tracker's key of an event of this origin: event ids
// are unique per store only.
func (o *origin) key(eventID string) string {
	if o.id == "" {
		return eventID
	}
	return o.id + "\x00" + eventID
}

// acquire takes an event of o for processing, with its payload bytes: it
// is refused when o was removed, when the event is held or finished
// recently, or when its payload does not fit in MaxHeldBytes. When it is
// acquired, gen is the tracker's generation of this acquisition (item.gen).
func (d *Dispatcher) acquire(o *origin, env core.Envelope) (acquireResult, uint64) {
	return d.take(o, env, func(key string) (uint64, bool) { return d.tracker.TryAcquire(key) })
}

// acquireClaimed is acquire for a row a claim read after the tracker's
// mark: it also refuses an event this dispatcher let go since then (the
// row was read while the event was still held here).
func (d *Dispatcher) acquireClaimed(o *origin, env core.Envelope, mark uint64) (acquireResult, uint64) {
	return d.take(o, env, func(key string) (uint64, bool) { return d.tracker.TryAcquireClaimed(key, mark) })
}

// take is acquire with the tracker's test.
func (d *Dispatcher) take(o *origin, env core.Envelope, try func(key string) (uint64, bool)) (acquireResult, uint64) {
	if !o.work.Hold() {
		return refused, 0
	}
	key := o.key(env.ID())
	gen, ok := try(key)
	if !ok {
		o.work.Release()
		return held, 0
	}
	size := heldSize(env)
	d.notePayload(size)
	if !d.reserveBytes(size) {
		// Refused for the budget, its row leased to this node: counted as
		// released, so this node's next claim takes its own rows again
		// (handoff.ReleaseCounter) instead of leaving it until the lease
		// ends.
		d.released.Add(1)
		d.tracker.Release(key, gen)
		o.work.Release()
		return overBudget, 0
	}
	return acquired, gen
}

// release gives up an event without a final outcome: it may be taken
// again. A stale item (its entry taken again after InFlightTTL) leaves the
// entry to its new holder. An item that took its event again past
// InFlightTTL and has not settled hands it back to the run it took it from
// (inflight.Tracker.Release), which may still write its outcome: undoing
// the take (a full queue, MaxHeldBytes, a lease too short) discards
// nothing.
func (d *Dispatcher) release(it item) {
	if d.tracker.Release(it.src.key(it.env.ID()), it.gen) {
		d.released.Add(1)
	}
	d.drop(it)
}

// releaseLater gives up an event whose outcome for later (put off, a
// RETRY left to the poller) is written: finished as far as its hand-offs
// go (a late hot one is refused, see inflight.Tracker.Finish), and
// counted as released, its row free for a claim when due.
func (d *Dispatcher) releaseLater(it item) {
	if d.tracker.Finish(it.src.key(it.env.ID()), it.gen) {
		d.released.Add(1)
	}
	d.drop(it)
}

// finish gives up an event whose final outcome (DONE or DEAD) is written.
func (d *Dispatcher) finish(it item) {
	d.tracker.Finish(it.src.key(it.env.ID()), it.gen)
	d.drop(it)
}

// drop gives back what taking it reserved (its payload bytes and its
// store's hold), leaving its tracker entry alone.
func (d *Dispatcher) drop(it item) {
	d.heldBytes.Add(-heldSize(it.env))
	it.src.work.Release()
	d.checkRoom()
}

// current reports whether it still holds its event: false once InFlightTTL
// let the event be taken again (the item is stale). Without InFlightTTL it
// is always true and costs nothing.
func (d *Dispatcher) current(it item) bool {
	return d.tracker.Holds(it.src.key(it.env.ID()), it.gen)
}

// settling is called before a run writes its outcome (DONE, RETRY, DEAD,
// put off): it reports whether the run still holds its event and, if so,
// keeps InFlightTTL from letting anyone take the event until the run let it
// go (or resumed it for an in-process retry). A stale run (the event was
// taken again after InFlightTTL, by this dispatcher's poller or hot path)
// must write nothing: its outcome would settle the row for the new run,
// since status writes are fenced on the owner only. settling then drops
// the run's item (its tracker entry stays the new holder's), logs a WARN,
// counts a lost lease and ends its Observer attempt as interrupted. (The
// item of a call the watchdog abandoned, w, is dropped once its listener
// returned: see park.) Without InFlightTTL it reports true and costs
// nothing.
func (d *Dispatcher) settling(it item, err error, w *callWatch) bool {
	if d.tracker.Settle(it.src.key(it.env.ID()), it.gen) {
		return true
	}
	it.observed(core.OutcomeInterrupted, errSuperseded)
	it.src.metrics.LeaseLost(1)
	attrs := eventAttrs(it.env, it.attempts, slog.Duration("in_flight_ttl", d.cfg.InFlightTTL))
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	it.src.logs.superseded.Hit(it.src.log, slog.LevelWarn,
		"delivery outlived InFlightTTL and the event was taken again; this run's outcome is discarded, the newer run's stands",
		attrs...)
	d.end(w, it, endDrop)
	return false
}

// storeQueue is the dispatcher's intake for one store (handoff.Queue): the
// hot path of the store's publishing client and the cold path of its
// poller. Events enqueued through it share the dispatcher's workers and
// queues; their outcomes are written to that store.
type storeQueue struct {
	d *Dispatcher
	o *origin
}

func init() {
	handoff.Of = func(d any, id string) handoff.Queue {
		dd := d.(*Dispatcher)
		o := dd.def
		if id != "" {
			o, _ = dd.stores.Get(id)
		}
		if o == nil {
			return nil
		}
		return storeQueue{d: dd, o: o}
	}
	handoff.OnKeyFreed = func(d any, id string, fn func([]core.OrderPos)) {
		if o := d.(*Dispatcher).origin(id); o != nil {
			o.freed.Store(&fn)
		}
	}
	handoff.OnPutOff = func(d any, id string, fn func(time.Time)) {
		if o := d.(*Dispatcher).origin(id); o != nil {
			o.putOff.Store(&fn)
		}
	}
}

func (q storeQueue) HotLease(env core.Envelope) core.Lease { return q.d.hotLease(env) }

func (q storeQueue) EnqueueHot(env core.Envelope, lease core.Lease) bool {
	return q.d.enqueueHot(q.o, env, lease)
}

func (q storeQueue) ClaimLease(now time.Time) core.Lease { return q.d.claimLease(now) }

func (q storeQueue) ClaimMark() uint64 { return q.d.tracker.Mark() }

func (q storeQueue) EnqueueCold(env core.Envelope, attempts int, leaseUntil, created time.Time, mark uint64, seq int64, redelivered bool) bool {
	return q.d.enqueueCold(q.o, env, attempts, leaseUntil, created, mark, seq, redelivered)
}

func (q storeQueue) ColdRoom() int { return q.d.coldRoom() }

func (q storeQueue) NotifyRoom(fn func()) { q.d.notifyRoom(fn) }

func (q storeQueue) Released() uint64 { return q.d.released.Load() }

func (q storeQueue) HeldPastTTL() bool { return q.d.heldPastTTL(q.o) }

func (q storeQueue) InFlight(eventID string) bool { return q.d.tracker.Contains(q.o.key(eventID)) }

func (q storeQueue) QueueDepths() (hot, cold int) { return q.d.queueDepths() }

func (q storeQueue) Held() int { return int(q.o.work.Held()) }

func (q storeQueue) OnTimers() int { return int(q.o.timers.Load()) }

func (q storeQueue) SkipHot() { q.d.released.Add(1) }

func (q storeQueue) HotWaiting() bool { return q.d.hotWaitingNow() }

// AddStore adds a store whose events this dispatcher delivers, with the
// same workers and listeners as every other store (one per database or
// tenant; package tenant does this). Outcomes of its events are written to store. id identifies the
// store in logs ("store" attribute), metrics (core.StoreMetrics) and the
// in-flight tracker (event ids need only be unique per store); adding an
// id that is present returns an error wrapping core.ErrInvalidConfig.
func (d *Dispatcher) AddStore(id string, store core.StatusWriter) error {
	if err := ident.ValidateStoreID(id); err != nil {
		return err
	}
	if nilval.Is(store) { // a nil *T too
		return &core.ConfigError{Field: "store " + id, Msg: "must not be nil"}
	}
	if d.closed.Load() {
		return core.ErrClosed
	}
	o := newOrigin(d, id, store)
	if !d.stores.Add(id, o) {
		return &core.ConfigError{Field: "store " + id, Msg: "is already added"}
	}
	return nil
}

// RemoveStore stops taking events of store id (its intake refuses them,
// its pending in-process retries are cancelled and left to the database)
// and waits until every event of it that the dispatcher still holds has
// its outcome written, or ctx ends; an event whose listener hung past
// ListenerGrace is held until that listener returns. Once it returned nil
// the store is no longer used and may be closed. When ctx ends first, the contexts of the
// store's listeners still running are cancelled (like a hard Close: no
// attempt is charged, their rows stay as they are and are delivered again
// once the store is back; they get ListenerGrace to return) and ctx's
// error is returned; the store is removed anyway, and calling RemoveStore
// again waits for those listeners to return. An unknown id returns nil.
// Like Close, RemoveStore then hands back the leases this dispatcher's
// Owner holds on the store's NEW/RETRY rows (except those of listeners
// still running), so any node delivers them at once.
//
// Called with the context of one of the store's listener calls (or one
// derived from it), it returns ErrCloseInListener at once and removes
// nothing: it would wait for that listener, so for itself.
func (d *Dispatcher) RemoveStore(ctx context.Context, id string) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if d.InListenerOf(ctx, id) {
		return ErrCloseInListener
	}
	o, ok := d.stores.Take(id)
	if !ok {
		return nil
	}
	o.work.Close()
	d.cancelRetries(o)
	held, err := o.work.Drain(ctx)
	if err != nil {
		// No worker will run the store's events still queued (its work
		// context is cancelled): they are not held, as Close empties the
		// queues before it releases.
		d.dropQueued(o)
		// The listeners just cancelled get ListenerGrace to return, so
		// that the release below hands back the leases of their events
		// too (the store is usually closed right after).
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ListenerGrace)
		_, _ = o.work.Drain(gctx)
		cancel()
	}
	// Hand back the leases of the store's events this dispatcher did not
	// deliver, except those of listeners still running.
	d.releaseOrigin(ctx, o)
	if err != nil {
		// The store's listeners were interrupted: their events stay as
		// they are in the database, delivered again once it is back.
		return fmt.Errorf("outbox: remove store %s: %d events still in flight: %w", id, held, err)
	}
	d.stores.Forget(id, o)
	return nil
}

// dropQueued takes o's events off the hot and cold queues and releases
// them; the other stores' events go back in the order they were in.
// Hand-offs wait meanwhile (intakeMu), so putting those back cannot block.
func (d *Dispatcher) dropQueued(o *origin) {
	d.intakeMu.Lock()
	defer d.intakeMu.Unlock()
	for _, q := range []chan item{d.hot, d.cold} {
		var keep []item
	take:
		for {
			select {
			case it := <-q:
				if it.src != o {
					keep = append(keep, it) // still counted in hotWaiting
					continue
				}
				if q == d.hot {
					d.hotWaiting.Add(-1)
				}
				d.release(it)
			default:
				break take
			}
		}
		for _, it := range keep {
			q <- it
		}
	}
}

// Stores returns the identifiers of the stores added with AddStore and not
// removed, sorted.
func (d *Dispatcher) Stores() []string { return slices.Clone(d.stores.IDs()) }

// origin returns the store id ("" for the one given to New), nil when d
// has none.
func (d *Dispatcher) origin(id string) *origin {
	if id == "" {
		return d.def
	}
	o, _ := d.stores.Get(id)
	return o
}
