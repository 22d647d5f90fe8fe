// Package poller is the fallback path of the outbox: at a low frequency it
// reads NEW and RETRY rows that are due and hands them to the dispatcher's
// cold queue. It catches what the hot path did not deliver: events dropped
// on a full hot queue, events of a crashed or restarted process, retries
// beyond the in-memory retry capacity. It also claims the events of an
// ordered key that waited behind a pending one: as soon as the dispatcher
// finished an ordered event, it hands the event's position to the poller,
// which claims the next event of the key by that position, between its
// polls (core.SuccessorClaimer; a store without it gets a full claim).
package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/internal/ratelog"
	"github.com/outbox-go/outbox/internal/wiring"
)

// queue is what the poller needs from the dispatcher's intake of one
// store (handoff.Cold).
type queue = handoff.Cold

// Store is what the poller needs from a store: claims, reaping, and
// MarkDead for rows that cannot be decoded.
type Store interface {
	core.Claimer
	MarkDead(ctx context.Context, owner, eventID, errMsg string) (bool, error)
}

// Poller periodically moves due rows to the dispatcher. Create it with
// [New] for one store or [NewMulti] for several (one per database or
// tenant, polled in the order of Config.Selector); [Poller.Start] runs it
// in the background, [Poller.PollOnce] runs one poll (for tests and
// tools). Safe for concurrent use.
type Poller struct {
	cfg     Config
	log     *slog.Logger
	run     *engine.Runner
	targets engine.Set[*target]

	mu sync.Mutex // guards target.failing

	cycleMu  sync.Mutex // one poll at a time; guards rotation
	rotation *engine.Rotation

	// freshStart: rows published before the loop began, or before the
	// store joined it, are never left for later by SkipRecent
	// (handoff.FreshStart); loopStart is when the loop began (Config.Now,
	// Unix nanoseconds).
	freshStart atomic.Bool
	loopStart  atomic.Int64

	// roomNoticed: a queue that was full has room again (armRoom): the
	// loop polls at once.
	roomNoticed atomic.Bool

	alarms alarms // wake-ups at the due times of events put off (alarm.go)

	wakeMu      sync.Mutex // guards the wake-ups (wake.go) and target.after
	wokenAll    bool       // Wake was called: the next poll ignores SkipRecent
	wokenStores []string   // stores to poll next, in order, ignoring SkipRecent
	afterStores []string   // stores with target.after waiting, in order
}

// target is one store the poller reads and the queue its events go to.
type target struct {
	id      string // "" for the store given to New
	store   Store
	queue   queue
	log     *slog.Logger
	metrics core.Metrics
	failing bool // an error incident is ongoing (log once per incident); guarded by Poller.mu
	// lastFail is when a poll of the incident last failed (guarded by
	// Poller.mu): it ends once polls have succeeded for recoverAfter.
	lastFail time.Time
	reaping  ratelog.Incident // its reaping fails: logged once per incident
	// skip is the back-off of a store whose polls failed in a row (a
	// database down or not answering: each failure can take
	// QueryTimeout); a wake-up naming the store polls it all the same.
	skip     engine.Skip
	counting ratelog.Incident // counting its blocked keys fails: logged once per incident
	// probedDue is the store's first due time read last (reportClaimLag),
	// at probedAt (Config.Now); zero when not read.
	probedDue, probedAt time.Time
	// joined is when the store was added (Config.Now), for a fresh
	// start (handoff.FreshStart); freshDone: a poll of the loop was not
	// full, so no row from before is left (guarded by Poller.cycleMu).
	joined    time.Time
	freshDone bool
	// roomArmed: a room notice is armed on queue (see armRoom).
	roomArmed atomic.Bool
	// after holds finished ordered events whose successors the loop
	// claims next (successors.go); guarded by Poller.wakeMu.
	after []core.OrderPos
	// lockedWait is the wait before the next claim of events found
	// locked (successors.go); guarded by Poller.cycleMu.
	lockedWait time.Duration
	// ownClaimed is 1 + the queue's release count
	// (handoff.ReleaseCounter) read before the last claim that took this
	// node's own rows, 0 before the first; guarded by Poller.cycleMu.
	ownClaimed uint64
	// ownMore: rows leased to this node and not held by the dispatcher
	// may wait past what the last claims read (a burst the hot queue
	// dropped): the last claim of this node's rows was full, or a claim
	// left rows it read unqueued. Claims leaving this node's rows out
	// cannot see them (see claimOwnPastHeld); guarded by Poller.cycleMu.
	ownMore bool
	// oldestDue is the available_at of the oldest row the last claim
	// found due, zero when it found none, and oldestID that row's event
	// id (see fullLag); guarded by Poller.cycleMu.
	oldestDue time.Time
	oldestID  string
}

// Result describes one poll.
type Result struct {
	Store    string // the store polled ("" for the store given to New, or none)
	Read     int    // rows read from the store
	Enqueued int    // events handed to the cold queue
	Skipped  int    // rows already in flight or not taken by a full queue
	Dead     int    // undecodable rows marked DEAD
	Full     bool   // the cold queue had no room: the poll was skipped
}

// New returns a poller reading from store and feeding d, the dispatcher
// created with dispatcher.New for the same store.
func New(store Store, d *dispatcher.Dispatcher, cfg Config) (*Poller, error) {
	if d == nil {
		return nil, &core.ConfigError{Field: "poller dispatcher", Msg: "must not be nil"}
	}
	q := handoff.Of(d, "")
	if q == nil {
		return nil, &core.ConfigError{Field: "poller dispatcher", Msg: "has no store of its own (use NewMulti and Add for a dispatcher of dispatcher.NewMulti)"}
	}
	return newWithQueue(store, q, cfg)
}

func newWithQueue(store Store, queue queue, cfg Config) (*Poller, error) {
	if nilval.Is(store) { // a nil *T too: it would panic at the first poll
		return nil, &core.ConfigError{Field: "poller store", Msg: "must not be nil"}
	}
	if queue == nil {
		return nil, &core.ConfigError{Field: "poller queue", Msg: "must not be nil"}
	}
	p, err := NewMulti(cfg)
	if err != nil {
		return nil, err
	}
	p.addTarget(&target{store: store, queue: queue, log: p.log, metrics: p.cfg.Metrics})
	return p, nil
}

// NewMulti returns a poller for several stores: add each with
// [Poller.Add]. Each poll reads one store, chosen by Config.Selector; the
// poller rests for Interval once every store had a poll that did not fill
// its batch.
func NewMulti(cfg Config) (*Poller, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With(slog.String("component", "outbox.poller"))
	return &Poller{cfg: cfg, rotation: engine.NewRotation(cfg.Selector).WithLogger(log), run: engine.NewRunner("poller"),
		log: log}, nil
}

// Add adds a store to poll, identified by id in logs ("store" attribute)
// and metrics (core.StoreMetrics); its events go to d, a dispatcher of
// dispatcher.NewMulti to which the same store was added under the same id
// (dispatcher.Dispatcher.AddStore). An empty or present id, or a
// dispatcher without that store, returns an error wrapping
// core.ErrInvalidConfig. Added to a started poller, the store is polled
// at once, as after a wake-up (see [Poller.Wake]), not after the rest of
// the interval.
func (p *Poller) Add(id string, store Store, d *dispatcher.Dispatcher) error {
	if id != "" && d != nil {
		if q := handoff.Of(d, id); q != nil {
			return p.addQueue(id, store, q)
		}
		return &core.ConfigError{Field: "poller store " + id, Msg: "is not a store of the dispatcher (add it there first)"}
	}
	return p.addQueue(id, store, nil)
}

func (p *Poller) addQueue(id string, store Store, queue queue) error {
	switch {
	case id == "":
		return &core.ConfigError{Field: "poller store id", Msg: "must not be empty"}
	case nilval.Is(store): // a nil *T too
		return &core.ConfigError{Field: "poller store " + id, Msg: "must not be nil"}
	case queue == nil:
		return &core.ConfigError{Field: "poller dispatcher of store " + id, Msg: "must not be nil"}
	}
	if err := p.addTarget(&target{id: id, store: store, queue: queue,
		log: p.log.With(slog.String("store", id)), metrics: wiring.MetricsForStore(p.cfg.Metrics, id)}); err != nil {
		return err
	}
	if p.run.Running() {
		// Polled at once, as after a wake-up of the store: it may hold
		// due rows already (a backlog, another node's expired leases).
		// (Before Start, the first poll reads every store.)
		p.wakeStore(id)
	}
	return nil
}

func (p *Poller) addTarget(t *target) error {
	t.joined = p.cfg.Now()
	if !p.targets.Add(t.id, t) {
		return &core.ConfigError{Field: "poller store " + t.id, Msg: "is already added"}
	}
	return nil
}

// Remove stops polling store id. It waits for a poll in progress to end,
// so after it returns the poller no longer touches the store. An unknown id
// is ignored.
func (p *Poller) Remove(id string) {
	p.cycleMu.Lock()
	defer p.cycleMu.Unlock()
	if t, ok := p.targets.Take(id); ok {
		p.targets.Forget(id, t)
	}
	p.forgetWake(id)
	p.forgetAlarms(id)
}

// Stores returns the identifiers of the stores polled, sorted ("" is the
// store given to New).
func (p *Poller) Stores() []string { return slices.Clone(p.targets.IDs()) }

// PollOnce runs one poll of the store chosen by the Selector (the only
// store for New): if the cold queue has room, claim up to min(BatchSize,
// room) due rows for this node's lease (plus, unless this node's rows can
// be left out, up to as many more it already holds) and enqueue those not
// already in flight. Rows are claimed only when unowned, when their lease expired, or
// when this node owns them (its own hot-queue drops). When a claim that
// left this node's rows out finds the others run out while this node's
// may go on past its last claim of them (a burst its hot queue dropped),
// a second claim takes them, past every row the dispatcher holds. Rows
// that fail to decode are marked DEAD with the reason. Without stores it
// does nothing.
func (p *Poller) PollOnce(ctx context.Context) (Result, error) {
	if ctx == nil {
		return Result{}, core.ErrNilContext
	}
	res, _, err := p.pollOnce(ctx, nil)
	return res, err
}

// pollDecision is what a poll tells the loop about the next one.
type pollDecision int

const (
	pollNow     pollDecision = iota // more is waiting: poll again at once
	pollSoon                        // BacklogInterval
	pollResting                     // Interval
	pollKeep                        // as planned before the wake-up this poll served
)

// pollOnce is PollOnce; it also tells when to poll next. With pr (the
// loop's polls) it serves the wake-ups first: a woken store is read
// before the Selector's pick, and a woken poll ignores SkipRecent (see
// [Poller.Wake]); and it passes the turns of failing stores (passTurn).
func (p *Poller) pollOnce(ctx context.Context, pr *probes) (res Result, next pollDecision, err error) {
	wakes := pr != nil
	p.cycleMu.Lock()
	defer p.cycleMu.Unlock()
	var (
		id         string
		t          *target
		ids        []string
		woken      bool // this poll serves a wake-up
		storeWoken bool // that wake-up named the store
	)
	if wakes {
		id, t, ids, storeWoken = p.takeWake()
		woken = t != nil
	}
	if t == nil {
		id, t, ids = p.targets.Next(p.rotation)
		// The loop skips stores whose polls failed lately: the others
		// take their turns (a lone store is polled at every turn).
		for skipped := 0; wakes && len(ids) > 1 && t != nil && p.passTurn(pr, t); skipped++ {
			if skipped >= len(ids) {
				return res, pollResting, nil // every store is backing off
			}
			p.rotation.Done(id, 0, false, ids)
			id, t, ids = p.targets.Next(p.rotation)
		}
	}
	if t == nil {
		return res, pollResting, nil
	}
	began := time.Now()
	skipRecent := p.cfg.SkipRecent
	switch {
	case woken:
		skipRecent = 0
	case wakes && p.freshStart.Load() && !t.freshDone:
		// A fresh start (handoff.FreshStart): rows published before the
		// loop began, or before the store joined it, are taken however
		// recent, over as many polls as they fill; the first poll that
		// is not full ends it (with a clock that stands still, as a
		// test's, SkipRecent stayed off for good).
		since := time.Unix(0, p.loopStart.Load())
		if t.joined.After(since) {
			since = t.joined
		}
		skipRecent = min(skipRecent, max(p.cfg.Now().Sub(since), 0))
	}
	res, full, err := p.pollTarget(ctx, t, skipRecent)
	if wakes && err == nil && !full && !res.Full {
		t.freshDone = true
	}
	if wakes {
		// A failure skips the store's next turns for a while: a database
		// that does not answer costs each poll QueryTimeout, which held
		// up the polls of every other store turn after turn.
		t.skip.Record(err != nil && ctx.Err() == nil, time.Since(began))
	}
	p.report(t, res, err)
	if res.Full {
		if woken {
			p.rewake(id, storeWoken)
		}
		return res, pollSoon, err
	}
	if storeWoken && !(full && res.Enqueued+res.Dead > 0) {
		// A store's own wake-up (its notification) served, and it has no
		// more waiting: the other stores keep their turns as planned. A
		// resting poller rests on, instead of polling every store of the
		// set for each notification of one.
		return res, pollKeep, err
	}
	switch rest, soon := p.rotation.Done(id, res.Enqueued+res.Dead, full, ids); {
	case soon:
		return res, pollSoon, err
	case rest:
		return res, pollResting, err
	}
	return res, pollNow, err
}

// pollTarget runs one poll of t, leaving rows younger than skipRecent to
// the hot path (a woken poll leaves none: the rows it is woken for are
// unowned, and new); it also reports whether a claim read as many rows as
// it asked for (full: more may be due).
func (p *Poller) pollTarget(ctx context.Context, t *target, skipRecent time.Duration) (res Result, full bool, err error) {
	res.Store = t.id
	hot, cold := t.queue.QueueDepths()
	p.cfg.Metrics.QueueDepths(hot, cold)
	room := t.queue.ColdRoom()
	if room <= 0 {
		res.Full = true
		p.armRoom(t)
		p.fullLag(t)
		return res, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
	defer cancel()
	limit := min(p.cfg.BatchSize, room)
	// Rows this node holds are still claimable by it (its own hot-queue
	// drops must be) and, being the oldest, come first in a claim. When
	// the queue can tell that every row leased here is held
	// (skipOwnRows), the claim leaves them out; else it asks for up to
	// that many more rows (at most twice the batch), so events held here
	// do not hide the next ones (and when they still may, ownMore).
	// A woken poll decides the same way: were it always to leave them
	// out, wake-ups coming faster than Interval (every unowned insert of
	// every node, on PostgreSQL) would keep this node's drops until their
	// lease ends.
	skipOwn := p.skipOwnRows(t)
	if !skipOwn {
		limit += min(readableHeld(t.queue), limit)
	}
	// The oldest row the claims find due (see fullLag), kept as it was
	// when they fail.
	lastDue, lastID := t.oldestDue, t.oldestID
	t.oldestDue, t.oldestID = time.Time{}, ""
	defer func() {
		if err != nil {
			t.oldestDue, t.oldestID = lastDue, lastID
			return
		}
		p.reportClaimLag(ctx, t, skipOwn)
	}()
	n, left, err := p.claim(ctx, t, limit, skipRecent, skipOwn, &res)
	if err != nil {
		return res, false, err
	}
	switch {
	case left:
		// Rows leased here and not handed over: more of this node's
		// rows to claim, soon.
		t.ownMore = true
		return res, true, nil
	case !skipOwn:
		// A full claim of this node's rows may have left more behind it,
		// also one that read held rows only (more held rows than the
		// claim reads past).
		t.ownMore = n == limit
	case t.ownMore && n < limit:
		// The rows of other nodes ran out, and this node's own may go
		// on past its last claim of them (a burst its hot queue
		// dropped): claim them now, past every row held here, rather
		// than leave them until the dispatcher holds nothing (a claim
		// of this node's rows every Interval).
		full, err = p.claimOwnPastHeld(ctx, t, skipRecent, &res)
		return res, full, err
	}
	return res, n == limit, nil
}

// claimOwnPastHeld is the claim of this node's rows after a claim that
// left them out: up to a batch of rows beyond all those the dispatcher
// holds (which, claimed or published first, come first), adding to res.
// It reports whether more of them may wait: it was full and found rows
// not held, or left some it read unqueued (t.ownMore).
func (p *Poller) claimOwnPastHeld(ctx context.Context, t *target, skipRecent time.Duration, res *Result) (full bool, err error) {
	room := t.queue.ColdRoom()
	if room <= 0 {
		return false, nil // the first claim filled the queue: the room notice follows
	}
	t.ownClaimed = releaseCount(t)
	limit := min(p.cfg.BatchSize, room) + readableHeld(t.queue)
	before := res.Enqueued + res.Dead
	n, left, err := p.claim(ctx, t, limit, skipRecent, false, res)
	if err != nil {
		return false, err
	}
	// Full and past every held row, yet nothing new (rows held that the
	// count missed): coming back would read the same rows again; this
	// node's rows are read again once it lets an event go or holds none.
	t.ownMore = left || (n == limit && res.Enqueued+res.Dead > before)
	return t.ownMore, nil
}

// claim runs one claim of t of up to limit rows, this node's own left out
// with skipOwn, and enqueues what it read, counted in res. It returns
// how many rows it read, and whether it left some of them, leased to this
// node, not handed over (see enqueue). A failed claim makes the next read this node's
// rows again: it may have leased rows to this node all the same (a
// timeout while its rows were read, a commit whose answer was lost).
func (p *Poller) claim(ctx context.Context, t *target, limit int, skipRecent time.Duration, skipOwn bool, res *Result) (n int, leftBehind bool, err error) {
	now := p.cfg.Now()
	lease := t.queue.ClaimLease(now)
	mark := t.queue.ClaimMark()
	start := time.Now()
	recs, err := t.store.ClaimDue(ctx, core.ClaimRequest{
		Owner: lease.Owner, Now: now, LeaseUntil: lease.Until,
		SkipRecent: skipRecent, Limit: limit, SkipOwn: skipOwn,
	})
	took := time.Since(start)
	if err != nil {
		if obs := p.cfg.Observer; obs != nil {
			obs.Claimed(t.id, 0, took, err)
		}
		t.ownClaimed = 0
		return 0, false, err
	}
	res.Read += len(recs)
	if len(recs) > 0 && (t.oldestDue.IsZero() || recs[0].AvailableAt.Before(t.oldestDue)) {
		t.oldestDue, t.oldestID = recs[0].AvailableAt, recs[0].ID
	}
	skipped := res.Skipped
	left := p.enqueue(ctx, t, lease, mark, recs, res)
	if obs := p.cfg.Observer; obs != nil {
		// The rows this node already held, read again, are no claim.
		obs.Claimed(t.id, len(recs)-(res.Skipped-skipped), took, nil)
	}
	return len(recs), left, nil
}

// releaseCount is 1 + the release count of t's queue
// (handoff.ReleaseCounter), 0 for a queue that does not count.
func releaseCount(t *target) uint64 {
	rc, ok := t.queue.(handoff.ReleaseCounter)
	if !ok {
		return 0
	}
	return rc.Released() + 1
}

// reportLag reports the age at now of the oldest row t's last claim found
// due (core.Metrics.OldestLag), 0 when it found none.
func (p *Poller) reportLag(t *target, now time.Time) { reportAge(t, t.oldestDue, now) }

// reportAge reports the age at now of a row due at due as t's oldest
// pending age: 0 for the zero time (none), never negative.
func reportAge(t *target, due, now time.Time) {
	if due.IsZero() {
		t.metrics.OldestLag(0)
		return
	}
	t.metrics.OldestLag(max(0, now.Sub(due)))
}

// firstDueReader is implemented by a store that can tell when its
// pending event due first became due (jdbcstore.Store): one read of an
// index.
type firstDueReader interface {
	FirstDue(ctx context.Context) (time.Time, error)
}

// reportClaimLag reports the oldest pending age after a claim of t. A
// claim that left this node's rows out (skipOwn) and found none due sees
// nothing of the events this node holds: a backlog in its queues waiting
// for slow workers (up to the queues' capacity, 2,000 events by default)
// read 0 however long it waited, and the lag alerts stayed silent. While
// the dispatcher holds events of t, the store's first due time is read
// instead, at most every lagProbeEvery (the age grows from it between two
// reads); a store that cannot tell reports 0 as before.
func (p *Poller) reportClaimLag(ctx context.Context, t *target, skipOwn bool) {
	now := p.cfg.Now()
	fd, ok := t.store.(firstDueReader)
	if !t.oldestDue.IsZero() || !skipOwn || !ok || readableHeld(t.queue) == 0 {
		t.probedDue, t.probedAt = time.Time{}, time.Time{}
		p.reportLag(t, now)
		return
	}
	if t.probedAt.IsZero() || now.Sub(t.probedAt) >= p.lagProbeEvery() {
		due, err := fd.FirstDue(ctx)
		if err != nil {
			// The claim succeeded: a failing read leaves the gauge as
			// the last one set it (the next poll tries again).
			return
		}
		t.probedDue, t.probedAt = due, now
	}
	reportAge(t, t.probedDue, now)
}

// lagProbeEvery is the least time between two reads of a store's first
// due time (reportClaimLag): 10 Intervals, 10 s at most.
func (p *Poller) lagProbeEvery() time.Duration { return min(10*time.Second, 10*p.cfg.Interval) }

// fullLag reports the oldest pending age of a poll skipped because the
// cold queue is full. The poll claims nothing, so it reads nothing (a
// query for the age alone would load the database when it is busiest).
// While the dispatcher still holds the oldest row the last claim found,
// that row is still pending: its age, growing, is the gauge's value, so a
// lag alert sees a stalled backlog age rather than the value of the last
// claim. Once the dispatcher let that row go, the poll knows nothing of
// the store's backlog (the cold queue is shared by every store of the
// dispatcher and holds its retries too, so a full queue does not mean
// this store is behind) and leaves the gauge as it was, until the next
// claim measures the backlog again.
func (p *Poller) fullLag(t *target) {
	if !t.oldestDue.IsZero() && t.queue.InFlight(t.oldestID) {
		p.reportLag(t, p.cfg.Now())
	}
}

// enqueue hands the claimed rows recs, leased with lease, to t's cold
// queue, and counts them in res: those already in flight are skipped,
// those that fail to decode are marked DEAD, and once the queue is full
// the rest waits, leased to this node, for its next claim, which takes
// this node's rows for that. It reports whether it left a row so, not
// handed over (the queue full, or the row refused).
func (p *Poller) enqueue(ctx context.Context, t *target, lease core.Lease, mark uint64, recs []core.Record, res *Result) (leftBehind bool) {
	for i, rec := range recs {
		if t.queue.InFlight(rec.ID) {
			res.Skipped++
			continue
		}
		env, err := rec.Envelope()
		if err != nil {
			if p.markDead(ctx, t, lease.Owner, rec, err) {
				res.Dead++
			}
			continue
		}
		again := redelivered(rec)
		if !t.queue.EnqueueCold(env, rec.Attempts, lease.Until, committed(rec, again), mark, rec.OrderSeq, again) {
			// Leased to this node and not held: the next claims must
			// read this node's rows again (not leave them out as all
			// held), and soon.
			t.ownClaimed, leftBehind = 0, true
			if t.queue.ColdRoom() <= 0 { // full: the rest waits for the next cycle
				res.Skipped += len(recs) - i
				break
			}
			res.Skipped++ // refused (a lease too short, the byte budget): taken again later
			continue
		}
		res.Enqueued++
	}
	return leftBehind
}

// redelivered reports whether rec's row tells that its event was handed
// to listeners before (core.Delivery.Redelivered): an attempt was
// charged, or it was put off without one (its last error is set by
// core.Postponer; a row never tried has none, and a replay clears it).
func redelivered(rec core.Record) bool { return rec.Attempts > 0 || rec.LastError != "" }

// committed is the commit time of rec's event for core.Delivery.Committed:
// its insert time, or, for an event never handed to listeners whose row
// became due later, that time (its available_at): a delayed event's
// NotBefore, which an envelope read back from the store does not carry,
// or the time it was replayed. Latency from commit to listener then does
// not count a delay the event was published with.
func committed(rec core.Record, redelivered bool) time.Time {
	if !redelivered && rec.AvailableAt.After(rec.CreatedAt) {
		return rec.AvailableAt
	}
	return rec.CreatedAt
}

// skipOwnRows reports whether a claim of t may leave out the rows leased
// by this node: the dispatcher holds events and let none go without an
// outcome since the last claim that took this node's rows, so each of
// those rows is held (queued, running or waiting for its DONE write) and
// a claim would only read them again, ahead of the rows it is after.
// With the dispatcher's InFlightTTL, an event held past it may be taken
// again: its row is then read too (handoff.TTLReporter). When it returns
// false the claim takes this node's rows, and the count read now is the
// one the next poll compares with.
func (p *Poller) skipOwnRows(t *target) bool {
	n := releaseCount(t)
	if n == 0 {
		return false
	}
	if n == t.ownClaimed && t.queue.Held() > 0 && !heldPastTTL(t.queue) {
		return true
	}
	t.ownClaimed = n
	return false
}

// readableHeld returns how many of the events q holds a claim of this
// node's rows reads: every one but those waiting on a timer, whose rows
// are not due (handoff.TimerReporter). Counted in a claim's limit, each
// of those let it lease one new row more.
func readableHeld(q queue) int {
	n := q.Held()
	if tr, ok := q.(handoff.TimerReporter); ok {
		n -= tr.OnTimers()
	}
	return max(0, n)
}

// heldPastTTL reports whether q holds an event past its TTL (see
// handoff.TTLReporter); false for a queue that cannot tell.
func heldPastTTL(q queue) bool {
	tr, ok := q.(handoff.TTLReporter)
	return ok && tr.HeldPastTTL()
}

// markDead records an undecodable row as DEAD and reports whether it could.
func (p *Poller) markDead(ctx context.Context, t *target, owner string, rec core.Record, cause error) bool {
	changed, err := t.store.MarkDead(ctx, owner, rec.ID, cause.Error())
	if err != nil {
		t.log.Error("cannot mark undecodable event DEAD", slog.String("event_id", rec.ID), slog.String("error", err.Error()))
		return false
	}
	if !changed { // the lease moved on within the cycle: not ours to judge
		return false
	}
	t.metrics.DispatchDead()
	t.log.Error("undecodable event marked DEAD", slog.String("event_id", rec.ID),
		slog.String("event_type", rec.Type), slog.String("error", cause.Error()))
	return true
}

// ReapOnce releases expired leases in every store, in batches of
// ReapBatch, at most a few batches per store and call, and returns how
// many it released. Leases released before a failing batch are reported
// too; the errors of all stores are joined.
func (p *Poller) ReapOnce(ctx context.Context) (total int64, err error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	var errs []error
	for _, t := range p.targets.Members() {
		n, err := p.reapTarget(ctx, t)
		total += n
		if err != nil && t.id != "" {
			err = fmt.Errorf("store %q: %w", t.id, err)
		}
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

func (p *Poller) reapTarget(ctx context.Context, t *target) (total int64, err error) {
	defer func() {
		if total > 0 {
			t.metrics.LeasesReaped(int(total))
			t.log.Info("released expired leases", slog.Int64("events", total))
		}
	}()
	for range maxReapBatchesPerCycle {
		qctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
		n, err := t.store.ReapExpired(qctx, p.cfg.Now(), p.cfg.ReapBatch)
		cancel()
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(p.cfg.ReapBatch) {
			break
		}
	}
	return total, nil
}

// armRoom asks t's queue, when it can tell (the dispatcher's can), to wake
// the loop once its workers drained it to half (and its payload budget
// has room, see handoff.RoomNotifier): a backlog then drains at
// the workers' speed, the next claim made while they still have half a
// queue to work on. BacklogInterval stays the longest wait. One notice
// per target is armed at a time.
func (p *Poller) armRoom(t *target) {
	rn, ok := t.queue.(handoff.RoomNotifier)
	if !ok || !t.roomArmed.CompareAndSwap(false, true) {
		return
	}
	rn.NotifyRoom(func() {
		t.roomArmed.Store(false)
		p.roomNoticed.Store(true)
		p.run.Wake()
	})
}

// Start runs poll cycles in the background until Close. It returns at
// once; the first poll runs at once too, so a process restarted after a
// crash delivers right away the rows left pending that no live lease
// holds: unowned ones (published after a Close, or released by one) and
// those whose lease expired, older than Config.SkipRecent (younger ones
// at the next poll, Interval later; the pollers of packages outbox and
// tenant take every row published before Start however recent, over as
// many polls as they fill). The rows the crashed process had leased
// (its hot-path events and its claims) wait until their lease ends
// (dispatcher.Config.Lease, 2 min by default), unless the new process
// runs with the same dispatcher Owner token, whose claims take them at
// once. Starting a running poller is an error wrapping
// core.ErrInvalidConfig; starting a closed one returns core.ErrClosed.
func (p *Poller) Start(ctx context.Context) error {
	return p.run.Start(ctx, p.loop) // a nil ctx: core.ErrNilContext
}

// Close stops the background cycles: no new poll begins, a poll in progress
// finishes, and Close returns once the loop has exited. If ctx ends first,
// the poll in progress is cancelled and ctx's error is returned; calling
// Close again waits again. Close is final (Start then returns
// core.ErrClosed) and returns nil on a poller that never started. Events a
// poll handed to the dispatcher are the dispatcher's to finish.
func (p *Poller) Close(ctx context.Context) error {
	return p.run.Close(ctx) // a nil ctx: core.ErrNilContext
}

func (p *Poller) loop(ctx context.Context, stop <-chan struct{}) {
	p.loopStart.Store(p.cfg.Now().UnixNano())
	var (
		due       time.Time // when the next poll is due (zero: at once), wake-ups aside
		reapDue   time.Time // when the next reaping is due (zero: never)
		queueFull bool      // the last poll found the cold queue full
	)
	if p.cfg.ReapInterval > 0 {
		reapDue = time.Now().Add(p.cfg.ReapInterval)
	}
	// The poller keeps its own record of wake-ups (which store, if any):
	// Pace's woken flag only says the wait was cut short. Claims of the
	// events after finished ordered ones (successors.go) come first, and
	// between the polls: they do not move the next poll. Reaping keeps
	// its own schedule: the loop wakes for whichever is due first.
	// Reaping runs beside the polls, one round at a time: a store that
	// does not answer costs a reap of it up to QueryTimeout, which held
	// up the polls of every store.
	var reaping chan struct{} // closed when the reap round under way ends
	pctx, stopProbes := context.WithCancel(ctx)
	pr := &probes{ctx: pctx}
	defer func() {
		p.stopAlarms()
		stopProbes()
		pr.wg.Wait()
		if reaping != nil {
			<-reaping
		}
	}()
	p.run.Pace(ctx, stop, 0, func(ctx context.Context, _ bool) time.Duration {
		p.claimSuccessors(ctx)
		if p.roomNoticed.Swap(false) {
			due = time.Time{}
		}
		if time.Until(due) <= 0 || p.wakePending() {
			res, next, err := p.pollOnce(ctx, pr)
			if next != pollKeep || err != nil {
				due = time.Now().Add(p.pollWait(res, next, err))
			} // else the next poll stays due when it was
			queueFull = res.Full
		}
		if !reapDue.IsZero() && time.Until(reapDue) <= 0 {
			if reaping == nil || isClosed(reaping) { // else the round under way stands for this one
				done := make(chan struct{})
				reaping = done
				go func() {
					defer close(done)
					p.reap(ctx)
				}()
			}
			reapDue = time.Now().Add(p.cfg.ReapInterval)
		}
		wait := time.Until(due)
		if !reapDue.IsZero() {
			wait = min(wait, time.Until(reapDue))
		}
		if p.wakePending() && !queueFull {
			// A wake-up waits for no schedule (due is the poll planned
			// without it), except for room in a full queue (armRoom).
			wait = 0
		}
		return max(wait, 0)
	})
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pollWait is the pause after a poll of the loop with this outcome.
func (p *Poller) pollWait(res Result, next pollDecision, err error) time.Duration {
	switch {
	case res.Full:
		// No room: wake-ups wait too (the woken store's is kept) until
		// the queue's room notice (armRoom), or at most BacklogInterval.
		return p.cfg.BacklogInterval
	case err != nil: // an incident: retry at the normal pace
	case next == pollNow:
		return 0
	case next == pollSoon:
		// The cold queue was full, or a claim was full of rows held
		// here already: more rows may be due, come back soon.
		return p.cfg.BacklogInterval
	}
	return p.cfg.Interval
}

// reap is the loop's reaping, every ReapInterval: it releases expired
// leases and counts the blocked ordering keys.
func (p *Poller) reap(ctx context.Context) {
	for _, t := range p.targets.Members() {
		_, err := p.reapTarget(ctx, t)
		if ctx.Err() != nil {
			return
		}
		p.reportReap(t, err)
	}
	p.reportBlockedKeys(ctx)
}

// recoverAfter is how long polls must have succeeded since the last
// failure for an incident to end: 30 s, or 10 intervals when that is
// shorter.
func (p *Poller) recoverAfter() time.Duration { return min(30*time.Second, 10*p.cfg.Interval) }

// reportReap logs a failing reaping of t once per incident (the store's
// polls fail too, and say so), at DEBUG after that, and its recovery.
func (p *Poller) reportReap(t *target, err error) {
	t.reaping.Report(t.log, err, "reaping expired leases failed; will try again every ReapInterval (logged once until it recovers)",
		"reaping expired leases failed again", "reaping expired leases recovered")
}

// report logs a failing poll once per incident and store, and the
// recovery once polls have succeeded for recoverAfter: a fault that comes
// and goes (a statement timeout some claims meet, connections cancelled
// now and then) is one incident, not an ERROR and a "recovered" line per
// failed poll.
func (p *Poller) report(t *target, res Result, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err != nil && errors.Is(err, context.Canceled):
	case err != nil && !t.failing:
		t.failing, t.lastFail = true, time.Now()
		t.log.Error("poll cycle failed; retrying every interval (logged once until it recovers)", slog.String("error", err.Error()))
	case err != nil:
		t.lastFail = time.Now()
		t.log.Debug("poll cycle failed again", slog.String("error", err.Error()))
	case t.failing && !res.Full && time.Since(t.lastFail) >= p.recoverAfter():
		// A cycle skipped for a full cold queue never reached the
		// database: it proves nothing, the incident goes on.
		t.failing = false
		t.log.Info("poller recovered")
	}
	if err == nil && res.Enqueued+res.Dead > 0 {
		t.log.Debug("poll cycle", slog.Int("read", res.Read), slog.Int("enqueued", res.Enqueued),
			slog.Int("skipped", res.Skipped), slog.Int("dead", res.Dead))
	}
}
