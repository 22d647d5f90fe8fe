package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/internal/inboxrow"
	"github.com/outbox-go/outbox/internal/ratelog"
)

// member is one inbox a Dispatcher claims from: the Inbox of
// [Inbox.NewDispatcher] (id "") or one added with [Dispatcher.AddInbox].
// Every claimed message carries its member, so the handler's outcome is
// written to the inbox the message came from.
type member struct {
	d   *Dispatcher
	id  string
	in  *Inbox
	log *slog.Logger // the dispatcher's, with "store" = id for an added inbox

	// work counts the claims, maintenance and handlers in progress;
	// closed once the inbox is removed (no more claims, reaping, cleanup).
	// Its Context ends when RemoveInbox gives up waiting: the member's
	// running handlers see their context end.
	work    *engine.Counter
	pending atomic.Bool // a message was enqueued since the last claim began
	// skip is the back-off of an inbox whose claims failed in a row (a
	// database down or not answering: each failure can take
	// StatusTimeout). An enqueue, which proves the database answers,
	// clears it.
	skip engine.Skip
	// claiming: a claim of the inbox runs beside the loop (a slow one,
	// see DispatcherConfig.DetachAfter); its turns are passed until it ended.
	claiming atomic.Bool
	// removing ends when RemoveInbox begins: the inbox's reaping and
	// cleanup stop at once (each statement is atomic) instead of holding
	// up the removal.
	removing context.Context
	remove   context.CancelFunc

	statusLog, lostLog, cycleLog *ratelog.Limiter
	observerLog                  *ratelog.Limiter // the Observer's panics
	reaping                      ratelog.Incident // its reaping fails: logged once per incident
	noHandlerLog                 *ratelog.PerKey  // topics warned about
}

func newMember(d *Dispatcher, id string, in *Inbox) *member {
	m := &member{
		d: d, id: id, in: in, log: d.log, work: engine.NewCounter(context.Background()),
		noHandlerLog: ratelog.NewPerKey(ratelog.DefaultMaxKeys, 5*time.Second),
		statusLog:    ratelog.New(5 * time.Second),
		lostLog:      ratelog.New(5 * time.Second),
		cycleLog:     ratelog.New(5 * time.Second),
		observerLog:  ratelog.New(5 * time.Second),
	}
	if id != "" {
		m.log = d.log.With(slog.String("store", id))
	}
	m.removing, m.remove = context.WithCancel(context.Background())
	return m
}

// notify is called by the member's Inbox after an enqueue: the next rest
// is skipped until the member was claimed from again, and the loop wakes.
func (m *member) notify() {
	m.pending.Store(true)
	m.skip.Clear()
	m.d.Wake()
}

// notifyAt is called by the member's Inbox after an enqueue of a message
// due at the wall-clock time at: the dispatcher wakes then.
func (m *member) notifyAt(at time.Time) { m.d.alarm.at(at) }

// handlerKey is the context key of the *handling a handler's context
// carries.
type handlerKey struct{}

// handling is one handler call: the member, the key of the message and
// the claim under which the dispatcher holds it. ProcessTx called with
// the handler's context on that message recognises that claim's lease as
// the caller's own.
type handling struct {
	m     *member
	key   Key
	claim inboxrow.Lease
	// marked: ProcessTx marked the message Done under the handler's lease
	// (its transaction may not have committed), so an acknowledgement that
	// finds no lease is no lost lease.
	marked atomic.Bool
}

// holds reports whether the lease held by lockedBy until lockedUntil is
// h's claim (the owner alone when the claimed row's expiry could not be
// read).
func (h *handling) holds(lockedBy string, lockedUntil time.Time) bool {
	return lockedBy == h.claim.Owner && (h.claim.Until.IsZero() || lockedUntil.Equal(h.claim.Until))
}

// ownHandling returns the handling ctx carries when it is that of the
// handler of message k in in's table, nil otherwise.
func ownHandling(ctx context.Context, in *Inbox, k Key) *handling {
	h, ok := ctx.Value(handlerKey{}).(*handling)
	if !ok || h.key != k {
		return nil
	}
	if o := h.m.in; o != in && (o.db.DB != in.db.DB || o.store.Table() != in.store.Table()) {
		return nil
	}
	return h
}

// StoreID returns the id of the inbox whose message the handler called
// with ctx is handling: the id given to [Dispatcher.AddInbox], or "" for
// the Inbox of [Inbox.NewDispatcher] and outside a handler. With one
// dispatcher over several databases (package tenant), it tells the handler
// which tenant the message belongs to.
func StoreID(ctx context.Context) string {
	if h, ok := ctx.Value(handlerKey{}).(*handling); ok {
		return h.m.id
	}
	return ""
}

// FromContext returns the Inbox whose message the handler called with ctx
// is handling (nil outside a handler). Its DB() is the database of
// that inbox, where a handler of a multi-database dispatcher does its
// business writes, for example with [Inbox.Process] of the handler's own
// message and ctx: the effect and the Done mark then commit together (see
// [Inbox.ProcessTx]).
func FromContext(ctx context.Context) *Inbox {
	if h, ok := ctx.Value(handlerKey{}).(*handling); ok {
		return h.m.in
	}
	return nil
}

// AddInbox adds an inbox whose work queue this dispatcher runs, with the
// same workers, handlers, owner token and settings as every other inbox
// (one per database or tenant). The claim cycles visit the inboxes in the
// order of DispatcherConfig.Selector; a claim that takes longer than 50 ms
// (a database that answers slowly, a claim waiting for a lock) runs on
// beside the cycles, which go on with the other inboxes, keeping its share
// of the workers (the idle ones it reserved divided by the number of
// inboxes, at least one); when it ends its messages start on them and on
// the workers idle then (the others are given back at once, lease and
// attempt, for a later claim); outcomes are written to the inbox
// each message came from, and Enqueue on in wakes the dispatcher. id
// identifies the inbox in logs (the "store" attribute), in [StoreID] and
// in RemoveInbox: non-empty valid UTF-8 of at most dispatcher.MaxStoreIDLen
// bytes without control characters. (The Inbox's own log lines, such as
// its claims, carry the id only when its Config.Logger does; package
// tenant sets that up.) An invalid or present id, a nil inbox
// or an inbox added already return an error wrapping core.ErrInvalidConfig;
// after Close it returns an error wrapping core.ErrClosed. It may be
// called while the dispatcher runs; the new inbox is reaped and claimed
// from at once.
func (d *Dispatcher) AddInbox(id string, in *Inbox) error {
	if err := ident.ValidateStoreID(id); err != nil {
		return err
	}
	if in == nil {
		return &core.ConfigError{Field: "inbox " + id, Msg: "must not be nil"}
	}
	if err := d.addMember(id, in); err != nil {
		return err
	}
	d.Wake()
	return nil
}

func (d *Dispatcher) addMember(id string, in *Inbox) error {
	d.addMu.Lock()
	defer d.addMu.Unlock()
	if d.run.Closed() {
		return fmt.Errorf("outbox: inbox: add inbox %q: %w", id, core.ErrClosed)
	}
	if other, _, ok := d.members.Find(func(o *member) bool { return o.in == in }); ok {
		return &core.ConfigError{Field: "inbox " + id, Msg: fmt.Sprintf("is already added as %q", other)}
	}
	m := newMember(d, id, in)
	m.pending.Store(true) // claim from it before the next rest
	if !d.members.Add(id, m) {
		return &core.ConfigError{Field: "inbox " + id, Msg: "is already added"}
	}
	in.register(m)
	return nil
}

// RemoveInbox stops claiming from inbox id (and reaping and cleaning it
// up: a cleanup under way is interrupted) and waits until its running handlers have recorded their outcome,
// or ctx ends. Once it returned nil the dispatcher no longer uses the
// inbox, and its database may be closed. When ctx ends first, the
// contexts of the inbox's running handlers are cancelled (a handler
// interrupted that way, returning an error, records nothing; one returning
// nil has its message Done; the lease of the first is released once it
// returned: its message is claimed again at once; RemoveInbox waits up to
// StatusTimeout more for interrupted handlers to return, so the release
// happens before the database is closed) and an error wrapping
// ctx's error is returned; the
// inbox is removed anyway, and calling RemoveInbox again waits again. An
// unknown id returns nil; "" returns an error wrapping
// core.ErrInvalidConfig (the Inbox of NewDispatcher cannot be removed).
//
// Called with the context of a handler of the inbox it removes, it
// returns ErrCloseInHandler at once and removes nothing: it would wait
// for that handler, so for itself.
func (d *Dispatcher) RemoveInbox(ctx context.Context, id string) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if h, ok := handlingOf(ctx); ok && h.m.d == d && h.m.id == id {
		return ErrCloseInHandler
	}
	if id == "" {
		return &core.ConfigError{Field: "inbox id", Msg: "must not be empty (the dispatcher's own inbox cannot be removed)"}
	}
	m, ok := d.members.Take(id)
	if !ok {
		return nil
	}
	m.work.Close()
	m.remove()
	m.in.unregister(m)
	if _, err := m.work.Drain(ctx); err != nil {
		// The handlers were interrupted. Those that honour their ctx return
		// at once and hand their leases back; give them StatusTimeout to do
		// so before the caller may close the inbox's database.
		gctx, cancel := context.WithTimeout(context.Background(), d.cfg.StatusTimeout)
		held, _ := m.work.Drain(gctx)
		cancel()
		return fmt.Errorf("outbox: inbox: remove inbox %q: %d claims or handlers still running after the interruption: %w", id, held, err)
	}
	d.members.Forget(id, m)
	return nil
}

// Inboxes returns the ids of the inboxes added with AddInbox and not
// removed, sorted.
func (d *Dispatcher) Inboxes() []string {
	all := d.members.IDs()
	ids := make([]string, 0, len(all))
	for _, id := range all {
		if id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// pick chooses the member of the next claim with the rotation and holds
// it; nil when there is none. It resets the member's pending flag and
// returns what it was (a caller that claims nothing sets it back). The
// caller holds cycleMu.
func (d *Dispatcher) pick() (*member, []string, bool) {
	_, m, ids := d.members.Next(d.rotation)
	if m == nil || !m.work.Hold() {
		return nil, ids, false
	}
	pending := m.pending.Swap(false) // an enqueue from now on is seen by this claim or flags the member again
	return m, ids, pending
}

// anyPending reports whether a member had a message enqueued since its
// last claim began, leaving out a member whose turns are passed now: its
// claim still runs beside the loop (its end wakes the loop), or it is
// skipped after failed claims. Counted, they kept the loop from resting,
// claiming from the other members again and again.
func (d *Dispatcher) anyPending() bool {
	_, _, ok := d.members.Find(func(m *member) bool {
		return m.pending.Load() && !m.claiming.Load() && !m.skip.Skipping()
	})
	return ok
}

// putOff hands back l's leases on the messages and the attempts their
// claim charged, claimable again after delay (no handler ran: their topic
// has none).
func (in *Inbox) putOff(ctx context.Context, l inboxrow.Lease, keys []Key, lastError string, delay time.Duration) (int, error) {
	n, err := in.store.PutOff(ctx, l, rowKeys(keys), lastError, delay)
	return int(n), in.mapErr(err)
}

// abandonAfter is AbandonAfter fenced on l, allowing no delay at all (a
// retry policy may ask for none).
func (in *Inbox) abandonAfter(ctx context.Context, l inboxrow.Lease, keys []Key, lastError string, delay time.Duration) (int, error) {
	return in.abandon(ctx, l, keys, lastError, func(int) time.Duration { return delay })
}
