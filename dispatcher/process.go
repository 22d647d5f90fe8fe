package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/engine"
)

// ErrListenerPanic wraps the value of a listener panic; the delivery counts
// as failed.
var ErrListenerPanic = errors.New("outbox: listener panicked")

// ErrListenerGoexit is the failure recorded when a listener ends its
// goroutine with runtime.Goexit instead of returning, as t.FailNow, t.Fatal
// and testify's require do when called inside a listener. The delivery
// counts as failed, like a panic (RETRY, or DEAD at MaxAttempts), an ERROR
// with the event id is logged, and a new worker replaces the one that
// exited, so the pool keeps its size.
var ErrListenerGoexit = errors.New("outbox: listener called runtime.Goexit")

// errSuperseded is the Observer's error of a delivery whose outcome was
// discarded: InFlightTTL let its event be taken again (see settling).
var errSuperseded = errors.New("outbox: the event was taken again after InFlightTTL; this delivery's outcome is discarded")

// process runs the listeners of one event and records the outcome. The
// event's id is held in the tracker on entry (unless InFlightTTL let it be
// taken again since: the item is stale, see current and settling); process
// releases it, or hands it over to an in-process retry timer. It reports
// false when a listener
// hung past its timeout: a replacement worker has taken over and the
// calling worker must exit.
func (d *Dispatcher) process(it item) bool {
	if it.src.work.Context().Err() != nil { // Close's deadline passed, or the store was removed: leave the row as it is
		d.release(it)
		return true
	}
	if !it.lease.IsZero() && !d.leaseCovers(it.lease) && d.current(it) {
		if err := d.renewLease(&it); err != nil {
			// The lease could run out before the outcome is written:
			// another node may take the event over. Leave it to a fresh
			// claim. Logged first: whoever sees the event let go sees
			// the line.
			it.src.logs.stale.Hit(it.src.log, slog.LevelWarn, "event waited too long for its lease (in the queue, or in its transaction after Publish) and could not be renewed; left for a new claim",
				eventAttrs(it.env, it.attempts, slog.Time("lease_until", it.lease), slog.String("error", err.Error()))...)
			d.release(it)
			return true
		}
	}
	if !d.current(it) {
		// InFlightTTL let the event be taken again while this copy waited
		// in a queue or on a timer: the newer copy delivers it.
		it.src.logs.superseded.Hit(it.src.log, slog.LevelWarn,
			"event waited past InFlightTTL and was taken again; this copy is left to the newer one",
			eventAttrs(it.env, it.attempts, slog.Duration("in_flight_ttl", d.cfg.InFlightTTL))...)
		d.release(it) // leaves the entry to the newer copy; this one is not put back should that be undone
		return true
	}
	it.attempt = d.observe(it)
	err := d.runListeners(it)
	if errors.Is(err, errAbandoned) {
		return false // the watchdog recorded the failure and replaced this worker
	}
	if err == errNoListener {
		return d.unhandled(it)
	}
	return d.outcome(it, err, nil)
}

// leaseCovers reports whether a lease ending at until still covers a
// listener call and its status write begun now.
func (d *Dispatcher) leaseCovers(until time.Time) bool {
	return !d.cfg.Now().Add(d.cfg.ListenerTimeout + d.cfg.StatusTimeout).After(until)
}

// errLeaseEnded and errLeaseNotRenewed say why renewLease left an event.
var (
	errLeaseEnded      = errors.New("its lease has run out: another node may hold it")
	errLeaseNotRenewed = errors.New("the store cannot renew leases (no core.LeaseExtender)")
)

// renewLease extends the lease of it's event to now + Lease +
// StatusTimeout (Lease past the write's longest wait) when the lease has
// not run out yet, through the store's core.LeaseExtender (the
// row must still be this node's, NEW or RETRY), and returns why it did
// not. An event waits for a worker with the lease it was published or
// claimed with, which must still cover its listener's timeout and status
// write when the worker starts: with a Lease little above ListenerTimeout
// + ListenerGrace + StatusTimeout (valid), no event published waited
// little enough, each was left for a new claim, claimed again with the
// same lease, and none was ever delivered. The renewed lease must still
// cover a listener call and its status write when the write returns (one
// that waited past StatusTimeout, as SQLite's busy handler can, left the
// listener less than its timeout, or none).
func (d *Dispatcher) renewLease(it *item) error {
	ext, ok := it.src.store.(core.LeaseExtender)
	now := d.cfg.Now()
	switch {
	case !now.Before(it.lease):
		return errLeaseEnded
	case !ok:
		return errLeaseNotRenewed
	}
	// Lease from the write's end at the latest: a write that takes up to
	// StatusTimeout leaves a listener call and its status write covered.
	until := now.Add(cfgpath.Sum(d.cfg.Lease, d.cfg.StatusTimeout))
	ctx, cancel := context.WithTimeout(it.src.work.Context(), d.cfg.StatusTimeout)
	defer cancel()
	n, err := ext.ExtendLeases(ctx, d.cfg.Owner, []string{it.env.ID()}, until)
	switch {
	case err != nil:
		return fmt.Errorf("renew its lease: %w", err)
	case n != 1:
		return errors.New("renew its lease: the row is no longer this node's (taken over, or finished)")
	case !d.leaseCovers(until):
		return errors.New("renew its lease: the renewal took so long that the lease no longer covers a listener call")
	}
	it.lease = until
	return nil
}

// observe starts the Observer's view of the attempt it is about to make:
// the listeners' parent context and the end of the attempt. Without an
// Observer it returns nil and costs nothing: the listeners get the
// store's work context. An Observer that panics (here or in the end it
// returned) is a fault of the observation only: it is logged and the
// delivery goes on unobserved; a nil context from it is the work
// context.
func (d *Dispatcher) observe(it item) *attempt {
	obs := d.cfg.Observer
	if obs == nil {
		return nil
	}
	a := &attempt{started: time.Now()}
	delivery := core.Delivery{Event: it.env, Store: it.src.id, Path: it.path(),
		Attempt: it.attempts + 1, Committed: it.committed, Redelivered: it.redelivered || it.attempts > 0}
	a.ctx, a.end = engine.Observe(it.src.work.Context(), func(ctx context.Context) (context.Context, func(core.DeliveryResult)) {
		return obs.Deliver(ctx, delivery)
	}, func(v any) {
		it.src.logs.observer.Hit(it.src.log, slog.LevelError, "observer panicked; the delivery goes on unobserved",
			eventAttrs(it.env, it.attempts, slog.String("panic", fmt.Sprint(v)))...)
	})
	return a
}

// markDead writes it DEAD with msg and settles it (once w's listener
// returned, for a call the watchdog abandoned: see park). Under the skip
// policy the next event of its key then goes on, at once: claimed by
// position when a claim read it, else by a full claim. logDead, when set,
// logs the dead letter once the row is DEAD, before the event is let go.
func (d *Dispatcher) markDead(it item, msg string, w *callWatch, logDead func()) {
	o := it.src
	st := d.writeStatus(it, "dead", func(ctx context.Context) (bool, error) {
		return o.store.MarkDead(ctx, d.cfg.Owner, it.env.ID(), msg)
	})
	if st == writeChanged {
		// Counted once the row is DEAD: a write fenced off (another node
		// took the event over and finished it) or failed (the event is
		// delivered again) made no dead letter, which the counter and
		// its alerts reported.
		o.metrics.DispatchDead()
		if logDead != nil {
			logDead() // before the event is let go, as for the other outcomes
		}
	}
	d.settle(it, st, w)
	if st == writeChanged && it.env.OrderKey() != "" && it.env.OnDead() == core.SkipOnDead {
		var after []core.OrderPos
		if o.successors != nil && it.seq > 0 {
			after = []core.OrderPos{{Key: it.env.OrderKey(), Seq: it.seq}}
		}
		o.keyFreed(after)
	}
}

// outcome records the result of a delivery: DONE (coalesced), RETRY with
// an in-process retry, or DEAD. It reports false when the calling worker
// must exit (see addDone). w is nil when the listeners returned; for a
// call the watchdog abandoned (always a failure) it is that call: the
// outcome is written now, but the item keeps its event, and its retry
// waits, until the listener returns (see park).
func (d *Dispatcher) outcome(it item, err error, w *callWatch) bool {
	id := it.env.ID()
	if err != nil && it.src.work.Context().Err() != nil {
		// Interrupted by shutdown (or by the removal of its store): no
		// attempt is charged, the row keeps its status and the next
		// process delivers it.
		it.observed(core.OutcomeInterrupted, err)
		it.src.log.LogAttrs(context.Background(), slog.LevelInfo, "delivery interrupted by shutdown; the event stays in the database",
			eventAttrs(it.env, it.attempts)...)
		d.end(w, it, endRelease)
		return true
	}
	if !d.settling(it, err, w) {
		return true // stale: the event was taken again after InFlightTTL
	}
	// Metrics and logs come before the status write, so whoever sees the
	// new status also sees them; but for DEAD, counted once the row is
	// (see markDead).
	owner, o := d.cfg.Owner, it.src
	if err == nil {
		o.metrics.DispatchSuccess()
		it.observed(core.OutcomeDone, nil)
		return d.addDone(it) // coalesced DONE write; the batcher settles it
	}
	var unavailable *core.UnavailableError
	// A listener puts its event off by returning the error; one that
	// panicked with it failed (the put-off took the panic for one, for
	// ever, no attempt ever charged). Never for an abandoned call
	// (ErrListenerHung).
	if !errors.Is(err, ErrListenerPanic) && errors.As(err, &unavailable) && unavailable != nil {
		it.observed(core.OutcomePutOff, err)
		d.unavailable(it, unavailable, err)
		return true
	}
	attempts := it.attempts + 1
	msg := err.Error()
	outcome, delay := engine.Decide(err, attempts, d.cfg.MaxAttempts, d.cfg.Retry)
	if outcome == engine.Dead {
		it.observed(core.OutcomeDead, err)
		d.markDead(it, msg, w, func() {
			o.log.LogAttrs(context.Background(), slog.LevelError, "event is DEAD after its last failed attempt",
				eventAttrs(it.env, attempts, slog.String("error", msg))...)
		})
		return true
	}
	nextAt := d.cfg.Now().Add(delay)
	leaseUntil := nextAt.Add(d.cfg.Lease)
	if w == nil && !d.timerFree(heldSize(it.env)) {
		// No timer will hold the retry: its row is any claim's once due,
		// this node's included (see hotLease).
		leaseUntil = nextAt
	}
	o.metrics.DispatchFailure()
	it.observed(core.OutcomeRetry, err)
	o.log.LogAttrs(context.Background(), slog.LevelWarn, "delivery failed; will retry",
		eventAttrs(it.env, attempts, slog.String("error", msg), slog.Duration("retry_in", delay))...)
	switch d.writeStatus(it, "retry", func(ctx context.Context) (bool, error) {
		return o.store.MarkRetry(ctx, owner, id, nextAt, leaseUntil, msg)
	}) {
	case writeFenced, writeFailed:
		d.end(w, it, endRelease)
	case writeChanged:
		// Still held for the retry: InFlightTTL applies again (before
		// the timer may fire and the retry settle).
		d.tracker.Resume(o.key(id), it.gen)
		retry := item{env: it.env, attempts: attempts, source: SourceRetry, lease: leaseUntil, src: o, gen: it.gen, committed: it.committed,
			redelivered: true}
		if w != nil {
			d.park(w, parked{it: retry, how: endRetry, due: nextAt}) // scheduled once the hung listener returned
			break
		}
		if !d.schedule(retry, delay) {
			d.releaseLater(it) // the poller retries it when due
		}
	}
	return true
}

// unavailable puts off an event whose listener could not reach its
// downstream (core.Unavailable): no attempt is charged, the event is due
// again after the error's After (the retry policy's first delay when
// unset). The listener reports the outage itself; the dispatcher logs
// each event put off at DEBUG only, so an outage is not a flood of lines.
func (d *Dispatcher) unavailable(it item, ue *core.UnavailableError, err error) {
	delay := ue.After
	if delay <= 0 {
		delay = max(engine.Delay(d.cfg.Retry, 1), time.Millisecond)
	}
	if m, ok := it.src.metrics.(core.PostponeMetrics); ok {
		m.Postponed()
	}
	it.src.log.LogAttrs(context.Background(), slog.LevelDebug, "listener's downstream unavailable; event put off without charging an attempt",
		eventAttrs(it.env, it.attempts, slog.String("error", err.Error()), slog.Duration("retry_in", delay))...)
	d.postpone(it, delay, err.Error(), true)
}

// settle releases an event after its final status write (once w's
// listener returned, for a call the watchdog abandoned). When the write
// went through, the id is remembered as finished. When it failed, the
// poller must deliver it again; when it was fenced off, another node owns
// the event and this node may claim it again only after that lease expired.
func (d *Dispatcher) settle(it item, st writeResult, w *callWatch) {
	if st == writeChanged {
		d.end(w, it, endFinish)
		return
	}
	d.end(w, it, endRelease)
}

// runListeners calls every listener in order; the first error or panic
// stops the run and fails the delivery. It returns errNoListener when no
// listener is registered for the event.
func (d *Dispatcher) runListeners(it item) error {
	env := it.env
	ls := d.listeners.ListenersFor(env.Type())
	if len(ls) == 0 {
		return errNoListener
	}
	for i, l := range ls {
		timeout := d.cfg.ListenerTimeout
		if !it.lease.IsZero() {
			// Leave time to write the outcome before the lease ends.
			timeout = min(timeout, it.lease.Sub(d.cfg.Now())-d.cfg.StatusTimeout)
		}
		if err := d.call(it, l, i+1, len(ls), timeout); err != nil {
			if errors.Is(err, errAbandoned) {
				return err
			}
			return fmt.Errorf("listener %d of %d: %w", i+1, len(ls), err)
		}
	}
	return nil
}

// call runs one listener under timeout, turning a panic into an error. A
// watchdog fires ListenerGrace after the timeout if the listener ignores
// its ctx and has still not returned: it records the delivery as failed,
// starts a replacement worker (the pool never shrinks) and call then
// returns errAbandoned, whenever the listener finally returns; the event
// stays held until then (see park). A listener
// that calls runtime.Goexit never returns: call records the failure of
// listener pos of n (ErrListenerGoexit) and starts a replacement worker
// while the goroutine unwinds, then lets it exit.
func (d *Dispatcher) call(it item, l core.Listener, pos, n int, timeout time.Duration) error {
	parent := it.src.work.Context()
	if it.attempt != nil {
		parent = it.attempt.ctx
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	w := &callWatch{began: time.Now()}
	watchdog := time.AfterFunc(timeout+d.cfg.ListenerGrace, func() { d.watch(it, w, timeout) })
	w.timer.Store(watchdog)
	p, err := engine.Guard(func() error { return l.OnEvent(ctx, it.env) }, func() {
		watchdog.Stop()
		if !d.returned(w) { // else the watchdog recorded the failure and replaced this worker
			d.goexited(it, pos, n)
		}
	})
	watchdog.Stop()
	if d.returned(w) {
		return errAbandoned // the watchdog recorded the failure and replaced this worker
	}
	if p != nil {
		it.src.log.LogAttrs(context.Background(), slog.LevelError, "listener panicked",
			eventAttrs(it.env, -1, slog.String("panic_type", fmt.Sprintf("%T", p.Value)), slog.String("stack", string(p.Stack)))...)
		return p.Err(ErrListenerPanic)
	}
	if err == nil && ctx.Err() == context.DeadlineExceeded && it.src.work.Context().Err() == nil {
		// A listener that returns nil after its deadline may not have
		// finished its work: count the overrun as a failure.
		err = fmt.Errorf("listener overran its timeout of %v: %w", timeout, context.DeadlineExceeded)
	}
	return err
}

// goexited handles a listener that called runtime.Goexit: its goroutine,
// a worker, is unwinding and cannot be stopped. It logs the failure with
// the stack (which still shows where Goexit was called), starts a
// replacement worker before this one's WaitGroup slot is given back (so
// Close keeps draining and the pool keeps its size), and records the
// delivery as failed.
func (d *Dispatcher) goexited(it item, pos, n int) {
	it.src.log.LogAttrs(context.Background(), slog.LevelError,
		"listener called runtime.Goexit instead of returning (as t.FailNow and require.* do); the delivery failed and its worker is replaced",
		eventAttrs(it.env, it.attempts+1, slog.String("stack", string(debug.Stack())))...)
	d.startWorkers(1)
	d.outcome(it, fmt.Errorf("listener %d of %d: %w", pos, n, ErrListenerGoexit), nil)
}

// ErrListenerHung is the failure recorded for a listener that did not
// return within ListenerTimeout + ListenerGrace.
var ErrListenerHung = errors.New("outbox: listener hung past its timeout")

// errAbandoned tells a worker that the watchdog took over its delivery.
var errAbandoned = errors.New("outbox: delivery abandoned by the watchdog")

// callWatch settles the race between a listener returning and the watchdog
// giving up on it. (What an abandoned call leaves to do once its listener
// returns waits in Dispatcher.hung, not here: a call that returns in time,
// the common case, allocates no more than these few bytes.)
type callWatch struct {
	began time.Time                  // the call's start (monotonic)
	timer atomic.Pointer[time.Timer] // the watchdog, which watch may reset once

	mu        sync.Mutex
	done      bool // the listener returned, or its goroutine exited
	abandoned bool // the watchdog gave up on it
	rearmed   bool // the watchdog gave the listener one more grace period
}

// rearm resets the watchdog for another d, once per call, unless the
// listener returned. It reports whether it did.
func (w *callWatch) rearm(d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.timer.Load()
	if w.done || w.rearmed || t == nil {
		return false
	}
	w.rearmed = true
	t.Reset(d)
	return true
}

// tryAbandon marks the call abandoned unless it already returned.
func (w *callWatch) tryAbandon() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false
	}
	w.abandoned = true
	return true
}

// watch is the watchdog's timer function. A timer that fires later than
// due by more than half of ListenerGrace says this process was stopped
// or starved of CPU meanwhile (SIGSTOP, a frozen VM): the listener's ctx
// ended during that stall too, and the listener has had no time to see
// it. It gets one more ListenerGrace before it counts as hung; a listener
// that heeds its ctx returns within it, its overrun a plain failure.
func (d *Dispatcher) watch(it item, w *callWatch, timeout time.Duration) {
	grace := d.cfg.ListenerGrace
	late := time.Since(w.began) - (timeout + grace)
	if d.watchLate != nil {
		late = d.watchLate(late)
	}
	if late > grace/2 && w.rearm(grace) {
		return
	}
	d.abandon(it, w, timeout)
}

// abandon is the watchdog: the listener ignored its ctx past the grace
// period. Record the failure, and keep the pool at full strength. The
// event stays held until the listener returns (see park).
func (d *Dispatcher) abandon(it item, w *callWatch, timeout time.Duration) {
	if !w.tryAbandon() {
		return
	}
	it.src.logs.hung.Hit(it.src.log, slog.LevelError, "listener ignored its context and hung past its timeout; its worker is replaced",
		eventAttrs(it.env, it.attempts+1, slog.Duration("timeout", timeout), slog.Duration("grace", d.cfg.ListenerGrace))...)
	d.startWorkers(1)
	d.outcome(it, fmt.Errorf("%w (timeout %v + grace %v)", ErrListenerHung, timeout, d.cfg.ListenerGrace), w)
}

// ending is how an item gives up its event once its outcome is written.
type ending uint8

const (
	endRelease ending = iota // release: the event may be taken again
	endFinish                // finish: its final outcome (DEAD) is written
	endDrop                  // drop: a stale item, whose entry is someone else's
	endRetry                 // schedule its in-process retry, else release it
)

// parked is what the outcome of an abandoned call left to do once its
// listener returns: how its item gives up the event, and for a retry
// (it is then the retry's item) when it is due.
type parked struct {
	it  item
	how ending
	due time.Time
}

// end has it give up its event as how says: at once when the listeners
// returned (w nil), else once the listener of w, a call the watchdog
// abandoned, returns (see park).
func (d *Dispatcher) end(w *callWatch, it item, how ending) {
	p := parked{it: it, how: how}
	if w != nil {
		d.park(w, p)
		return
	}
	d.unpark(p)
}

// park leaves p to be done once the listener of w returns. The watchdog
// wrote the outcome of w, a call that ignored its ctx past its grace, and
// a replacement worker took over; but the listener still runs, so the
// event stays held (its tracker entry, payload bytes and store hold)
// until it returns: neither its in-process retry nor this node's poller
// runs it a second time alongside (unless InFlightTTL lets it be taken
// again), and Close keeps its lease. A listener that never returns keeps
// one event, whatever its retries would have been. If the listener
// returned meanwhile, p is done at once.
func (d *Dispatcher) park(w *callWatch, p parked) {
	w.mu.Lock()
	if !w.done {
		d.hungMu.Lock()
		if d.hung == nil {
			d.hung = make(map[*callWatch]parked)
		}
		d.hung[w] = p
		if p.how == endRetry && !d.keeping {
			d.keeping = true
			go d.keepHungLeases()
		}
		d.hungMu.Unlock()
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	d.unpark(p)
}

// returned marks the listener of w returned (or its goroutine exited) and
// reports whether the watchdog had abandoned the call; if it had, what its
// outcome parked is done now (see park), else when that outcome is written.
func (d *Dispatcher) returned(w *callWatch) bool {
	w.mu.Lock()
	w.done = true
	if !w.abandoned {
		w.mu.Unlock()
		return false
	}
	d.hungMu.Lock()
	p, ok := d.hung[w]
	delete(d.hung, w)
	d.hungMu.Unlock()
	w.mu.Unlock()
	if ok {
		d.unpark(p)
	}
	return true
}

// unpark does p: the item gives up its event. A retry is scheduled for
// when it is due (at once if that is past), or released for the poller
// when timers are full, the dispatcher is closing or its store is being
// removed.
func (d *Dispatcher) unpark(p parked) {
	switch p.how {
	case endRelease:
		d.release(p.it)
	case endFinish:
		d.finish(p.it)
	case endDrop:
		d.drop(p.it)
	case endRetry:
		if p.it.src.work.Closed() || !d.schedule(p.it, p.due.Sub(d.cfg.Now())) {
			d.releaseLater(p.it) // the poller retries it when due
		}
	}
}

// keepHungLeases renews, every quarter of Lease, the leases of the events
// whose retry waits for a hung listener to return (park): their rows are
// RETRY, leased to this node until Lease after the retry is due, but the
// stuck call may run longer, and another node must not claim the event
// (nor, in order, the events after it) while it does. It ends once no
// such retry waits, or when the dispatcher is done.
func (d *Dispatcher) keepHungLeases() {
	t := time.NewTicker(max(d.cfg.Lease/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-d.done:
			d.hungMu.Lock()
			d.keeping = false
			d.hungMu.Unlock()
			return
		}
		if !d.renewHungLeases() {
			return
		}
	}
}

// renewHungLeases extends to now + Lease the leases of the retries waiting
// for hung listeners, through each store's core.LeaseExtender, and
// reports whether any such retry waits (false ends keepHungLeases, which
// park starts again for the next one).
func (d *Dispatcher) renewHungLeases() bool {
	type entry struct {
		w  *callWatch
		id string
	}
	byStore := make(map[*origin][]entry)
	d.hungMu.Lock()
	for w, p := range d.hung {
		if p.how == endRetry {
			byStore[p.it.src] = append(byStore[p.it.src], entry{w, p.it.env.ID()})
		}
	}
	if len(byStore) == 0 {
		d.keeping = false
		d.hungMu.Unlock()
		return false
	}
	d.hungMu.Unlock()
	until := d.cfg.Now().Add(d.cfg.Lease)
	for o, entries := range byStore {
		ext, ok := o.store.(core.LeaseExtender)
		if !ok {
			continue
		}
		ids := make([]string, len(entries))
		for i, e := range entries {
			ids[i] = e.id
		}
		n, err := extendLeases(ext, d.cfg.StatusTimeout, d.cfg.Owner, ids, until)
		if err != nil {
			o.logs.status.Hit(o.log, slog.LevelError, "cannot renew the lease of an event whose listener hangs; another node may deliver it alongside once it expires",
				slog.Int("events", len(ids)), slog.String("event_id", ids[0]), slog.String("error", err.Error()))
			continue
		}
		// Each id's own answer, when some row did not take the new lease.
		var lost map[string]bool
		if n < int64(len(ids)) {
			lost = d.leasesLost(ext, ids, until)
		}
		// The retry runs with the lease it now has. One whose row another
		// node took over (its lease ran out: this process was stopped, or
		// starved, past it) or finished is given up when its listener
		// returns: it kept the lease it believed it had, and ran the event
		// again after the other node had delivered it.
		var gone []string
		d.hungMu.Lock()
		for _, e := range entries {
			if p, ok := d.hung[e.w]; ok && p.how == endRetry {
				if lost[e.id] {
					p.how = endRelease
					gone = append(gone, e.id)
				} else {
					p.it.lease = until
				}
				d.hung[e.w] = p
			}
		}
		d.hungMu.Unlock()
		if len(gone) > 0 {
			o.metrics.LeaseLost(len(gone))
			o.logs.lease.Hit(o.log, slog.LevelWarn, "the lease of an event whose listener hangs was taken over or its row finished (this process stopped or starved past the lease); its retry is given up here",
				slog.Int("events", len(gone)), slog.String("event_id", gone[0]), slog.String("owner", d.cfg.Owner))
		}
	}
	return true
}

// extendLeases runs one ExtendLeases bounded by timeout.
func extendLeases(ext core.LeaseExtender, timeout time.Duration, owner string, ids []string, until time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return ext.ExtendLeases(ctx, owner, ids, until)
}

// leasesLost extends the leases of ids one at a time, after a renewal of
// them all changed fewer rows than ids, and returns those whose row is no
// longer this node's to renew. An id whose renewal failed is not among
// them: the next renewal asks again.
func (d *Dispatcher) leasesLost(ext core.LeaseExtender, ids []string, until time.Time) map[string]bool {
	lost := make(map[string]bool)
	for _, id := range ids {
		if n, err := extendLeases(ext, d.cfg.StatusTimeout, d.cfg.Owner, []string{id}, until); err == nil && n == 0 {
			lost[id] = true
		}
	}
	return lost
}

// hungCalls returns how many abandoned calls wait for their listener to
// return (test hook: HungCalls).
func (d *Dispatcher) hungCalls() int {
	d.hungMu.Lock()
	defer d.hungMu.Unlock()
	return len(d.hung)
}

// writeResult is the outcome of a status write.
type writeResult int

const (
	writeChanged writeResult = iota // the row changed
	writeFenced                     // nothing changed: DONE already or another owner
	writeFailed                     // the write failed; the row is as before
)

// writeStatus runs one fenced status write with a timeout. A failed write
// is logged (rate-limited) and leaves the row for the poller, which
// delivers the event again: at least once, never lost. A write that
// changed nothing was fenced off: the row is DONE already or another node
// owns it now; it is reported as a lost lease.
func (d *Dispatcher) writeStatus(it item, what string, write func(context.Context) (bool, error)) writeResult {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StatusTimeout)
	defer cancel()
	changed, err := write(ctx)
	if err != nil {
		it.src.logs.status.Hit(it.src.log, slog.LevelError, "status write failed; the poller will deliver the event again",
			eventAttrs(it.env, it.attempts, slog.String("status", what), slog.String("error", err.Error()))...)
		return writeFailed
	}
	if !changed {
		it.src.metrics.LeaseLost(1)
		it.src.logs.lease.Hit(it.src.log, slog.LevelWarn, "status write fenced off: the event is DONE already or another node owns it now",
			eventAttrs(it.env, it.attempts, slog.String("status", what), slog.String("owner", d.cfg.Owner))...)
		return writeFenced
	}
	return writeChanged
}

// schedule keeps the event in memory until delay elapses, then puts it on
// the cold queue. It reports false (and keeps nothing) when timers are
// disabled, RetryCapacity is used up, or the dispatcher is closing.
func (d *Dispatcher) schedule(it item, delay time.Duration) bool {
	if d.cfg.RetryCapacity < 0 {
		return false
	}
	d.retryMu.Lock()
	defer d.retryMu.Unlock()
	size := heldSize(it.env)
	if !d.canTime(size) {
		return false
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		d.retryMu.Lock()
		_, live := d.retryTimers[t]
		if live {
			delete(d.retryTimers, t)
			d.timerBytes.Add(-size)
			it.src.timers.Add(-1)
		}
		d.retryMu.Unlock()
		if !live { // cancelled by Close, which released the event
			return
		}
		if d.closed.Load() || it.src.work.Closed() {
			d.release(it)
			if d.closed.Load() {
				// Fired as Close began, before it stopped the timers:
				// its release may have found this event held and kept
				// its lease.
				d.releaseLate(it.src)
			}
			return
		}
		if !d.offerCold(it, false) {
			d.release(it) // the poller delivers it
			if d.closed.Load() {
				// Closed since the look above: Close may have kept
				// this row's lease, the event being held then.
				d.releaseLate(it.src)
			}
		}
	})
	d.retryTimers[t] = it
	d.timerBytes.Add(size)
	it.src.timers.Add(1)
	return true
}

// timerFree reports whether a timer could hold an event of size bytes
// now (see schedule), without taking one.
func (d *Dispatcher) timerFree(size int64) bool {
	if d.cfg.RetryCapacity < 0 {
		return false
	}
	d.retryMu.Lock()
	defer d.retryMu.Unlock()
	return d.canTime(size)
}

// canTime reports whether a timer may hold an event of size bytes: the
// dispatcher is open, RetryCapacity has room, and so has the timers'
// share of MaxHeldBytes (timerRoom). Called under retryMu, with a
// RetryCapacity of at least 0.
func (d *Dispatcher) canTime(size int64) bool {
	return !d.closed.Load() && len(d.retryTimers) < d.cfg.RetryCapacity && d.timerRoom(size)
}

// timerRoom reports whether an event of size bytes may wait on a timer:
// timers hold at most half of MaxHeldBytes (any one event when they hold
// none), so events delayed or retried far ahead never take the whole
// budget from the hot path and the poller, which would then deliver
// nothing until their timers fired. Called under retryMu.
func (d *Dispatcher) timerRoom(size int64) bool {
	limit := d.cfg.MaxHeldBytes
	cur := d.timerBytes.Load()
	return limit < 0 || cur == 0 || cur+size <= limit/2
}

// cancelRetries stops the pending timers of o's events (of every store when
// o is nil) and releases their events.
func (d *Dispatcher) cancelRetries(o *origin) {
	d.retryMu.Lock()
	var stopped []item
	for t, it := range d.retryTimers {
		if o == nil || it.src == o {
			delete(d.retryTimers, t)
			d.timerBytes.Add(-heldSize(it.env))
			it.src.timers.Add(-1)
			t.Stop()
			stopped = append(stopped, it)
		}
	}
	d.retryMu.Unlock()
	for _, it := range stopped {
		d.release(it)
	}
}

// pendingRetries returns how many events wait on a timer (retries and
// delayed events).
func (d *Dispatcher) pendingRetries() int {
	d.retryMu.Lock()
	defer d.retryMu.Unlock()
	return len(d.retryTimers)
}

// eventAttrs are the log attributes of an event: never its payload or
// header values. attempts < 0 is omitted.
func eventAttrs(env core.Envelope, attempts int, extra ...slog.Attr) []slog.Attr {
	attrs := make([]slog.Attr, 0, 3+len(extra))
	attrs = append(attrs, slog.String("event_id", env.ID()), slog.String("event_type", env.Type()))
	if attempts >= 0 {
		attrs = append(attrs, slog.Int("attempts", attempts))
	}
	return append(attrs, extra...)
}
