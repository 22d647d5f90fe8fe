// Package poller is the fallback path of the outbox: at a low frequency it
// reads NEW and RETRY rows that are due and hands them to the dispatcher's
// cold queue. It catches what the hot path did not deliver: events dropped
// on a full hot queue, events of a crashed or restarted process, retries
// beyond the in-memory retry capacity.
package poller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/outbox-go/outbox/core"
)

// Queue is what the poller needs from a dispatcher.
// *dispatcher.Dispatcher implements it.
type Queue interface {
	// ClaimLease returns the lease to claim rows with at now: the
	// dispatcher's owner token and the end of the lease.
	ClaimLease(now time.Time) core.Lease
	// EnqueueCold offers a claimed event without blocking; false means not taken.
	EnqueueCold(env core.Envelope, attempts int, leaseUntil time.Time) bool
	// ColdRoom returns how many events the cold queue can take now.
	ColdRoom() int
	// InFlight reports whether the event is already held by the dispatcher.
	InFlight(eventID string) bool
	// QueueDepths returns the hot and cold queue lengths (for metrics).
	QueueDepths() (hot, cold int)
}

// Store is what the poller needs from a store: claims, reaping, and
// MarkDead for rows that cannot be decoded.
type Store interface {
	core.Claimer
	MarkDead(ctx context.Context, owner, eventID, errMsg string) (bool, error)
}

// Poller periodically moves due rows to the dispatcher. Create it with
// [New]; [Poller.Start] runs it in the background, [Poller.PollOnce] runs
// one cycle (for tests and tools). Safe for concurrent use.
type Poller struct {
	cfg   Config
	store Store
	queue Queue
	log   *slog.Logger

	mu      sync.Mutex // guards the fields below and serializes cycles' state
	running bool
	stop    chan struct{}
	done    chan struct{}
	cancel  context.CancelFunc
	failing bool // an error incident is ongoing (log once per incident)

	cycleMu sync.Mutex // one cycle at a time
}

// Result describes one poll cycle.
type Result struct {
	Read     int  // rows read from the store
	Enqueued int  // events handed to the cold queue
	Skipped  int  // rows already in flight or not taken by a full queue
	Dead     int  // undecodable rows marked DEAD
	Full     bool // the cold queue had no room: the cycle was skipped
}

// New returns a poller reading from store and feeding queue.
func New(store Store, queue Queue, cfg Config) (*Poller, error) {
	if store == nil {
		return nil, &core.ConfigError{Field: "poller store", Msg: "must not be nil"}
	}
	if queue == nil {
		return nil, &core.ConfigError{Field: "poller queue", Msg: "must not be nil"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Poller{cfg: cfg, store: store, queue: queue,
		log: cfg.Logger.With(slog.String("component", "outbox.poller"))}, nil
}

// PollOnce runs one cycle: if the cold queue has room, claim up to
// min(BatchSize, room) due rows for this node's lease and enqueue those not
// already in flight. Rows are claimed only when unowned, when their lease
// expired, or when this node owns them (its own hot-queue drops). Rows that
// fail to decode are marked DEAD with the reason.
func (p *Poller) PollOnce(ctx context.Context) (Result, error) {
	res, _, err := p.pollOnce(ctx)
	return res, err
}

// pollOnce is PollOnce; it also returns the claim limit it used (0 when
// the cold queue was full), so the loop can tell a full batch.
func (p *Poller) pollOnce(ctx context.Context) (res Result, limit int, err error) {
	p.cycleMu.Lock()
	defer p.cycleMu.Unlock()
	hot, cold := p.queue.QueueDepths()
	p.cfg.Metrics.QueueDepths(hot, cold)
	room := p.queue.ColdRoom()
	if room <= 0 {
		res.Full = true
		return res, 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
	defer cancel()
	now := p.cfg.Now()
	lease := p.queue.ClaimLease(now)
	limit = min(p.cfg.BatchSize, room)
	recs, err := p.store.ClaimDue(ctx, core.ClaimRequest{
		Owner: lease.Owner, Now: now, LeaseUntil: lease.Until,
		SkipRecent: p.cfg.SkipRecent, Limit: limit,
	})
	if err != nil {
		return res, limit, err
	}
	res.Read = len(recs)
	if len(recs) > 0 {
		p.cfg.Metrics.OldestLag(max(0, now.Sub(recs[0].AvailableAt)))
	} else {
		p.cfg.Metrics.OldestLag(0)
	}
	for i, rec := range recs {
		if p.queue.InFlight(rec.ID) {
			res.Skipped++
			continue
		}
		env, err := rec.Envelope()
		if err != nil {
			if p.markDead(ctx, lease.Owner, rec, err) {
				res.Dead++
			}
			continue
		}
		if !p.queue.EnqueueCold(env, rec.Attempts, lease.Until) {
			if p.queue.ColdRoom() <= 0 { // full: the rest waits for the next cycle
				res.Skipped += len(recs) - i
				break
			}
			res.Skipped++
			continue
		}
		res.Enqueued++
	}
	return res, limit, nil
}

// markDead records an undecodable row as DEAD and reports whether it could.
func (p *Poller) markDead(ctx context.Context, owner string, rec core.Record, cause error) bool {
	changed, err := p.store.MarkDead(ctx, owner, rec.ID, cause.Error())
	if err != nil {
		p.log.Error("cannot mark undecodable event DEAD", slog.String("event_id", rec.ID), slog.String("error", err.Error()))
		return false
	}
	if !changed { // the lease moved on within the cycle: not ours to judge
		return false
	}
	p.cfg.Metrics.DispatchDead()
	p.log.Error("undecodable event marked DEAD", slog.String("event_id", rec.ID),
		slog.String("event_type", rec.Type), slog.String("error", cause.Error()))
	return true
}

// ReapOnce releases expired leases in batches of ReapBatch, at most a few
// batches per call, and returns how many it released. Leases released
// before a failing batch are reported too.
func (p *Poller) ReapOnce(ctx context.Context) (total int64, err error) {
	defer func() {
		if total > 0 {
			p.cfg.Metrics.LeasesReaped(int(total))
			p.log.Info("released expired leases", slog.Int64("events", total))
		}
	}()
	for range maxReapBatchesPerCycle {
		qctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
		n, err := p.store.ReapExpired(qctx, p.cfg.Now(), p.cfg.ReapBatch)
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

// Start runs cycles in the background until Stop. It returns at once.
func (p *Poller) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return &core.ConfigError{Field: "poller", Msg: "already started"}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.running, p.cancel = true, cancel
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.loop(runCtx, p.stop, p.done)
	return nil
}

// Stop ends the background cycles, cancelling a cycle in progress, and
// waits for the loop to exit or ctx to expire. It is safe to call more than
// once and on a poller that never started. Close is an alias.
func (p *Poller) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.running {
		p.mu.Unlock()
		return nil
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
		p.cancel()
	}
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close is Stop.
func (p *Poller) Close(ctx context.Context) error { return p.Stop(ctx) }

func (p *Poller) loop(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(p.cfg.Interval)
	defer t.Stop()
	lastReap := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		res, limit, err := p.pollOnce(ctx)
		p.report(res, err)
		if p.cfg.ReapInterval > 0 && time.Since(lastReap) >= p.cfg.ReapInterval {
			lastReap = time.Now()
			if _, err := p.ReapOnce(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("reaping expired leases failed; will try again", slog.String("error", err.Error()))
			}
		}
		next := p.cfg.Interval
		// A full claim (limited by BatchSize or by the cold queue's room)
		// means more rows may be due: come back soon.
		// A full claim means a backlog even when every row was in flight
		// here already (own rows come first): poll again soon.
		if err == nil && limit > 0 && res.Read == limit || res.Full {
			next = p.cfg.BacklogInterval
		}
		t.Reset(next)
	}
}

// report logs a failing cycle once per incident, and the recovery.
func (p *Poller) report(res Result, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err != nil && errors.Is(err, context.Canceled):
	case err != nil && !p.failing:
		p.failing = true
		p.log.Error("poll cycle failed; retrying every interval (logged once until it recovers)", slog.String("error", err.Error()))
	case err != nil:
		p.log.Debug("poll cycle failed again", slog.String("error", err.Error()))
	case p.failing && !res.Full:
		// A cycle skipped for a full cold queue never reached the
		// database: it proves nothing, the incident goes on.
		p.failing = false
		p.log.Info("poller recovered")
	}
	if err == nil && res.Enqueued+res.Dead > 0 {
		p.log.Debug("poll cycle", slog.Int("read", res.Read), slog.Int("enqueued", res.Enqueued),
			slog.Int("skipped", res.Skipped), slog.Int("dead", res.Dead))
	}
}
