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
	// EnqueueCold offers an event without blocking; false means not taken.
	EnqueueCold(env core.Envelope, attempts int) bool
	// ColdRoom returns how many events the cold queue can take now.
	ColdRoom() int
	// InFlight reports whether the event is already held by the dispatcher.
	InFlight(eventID string) bool
	// QueueDepths returns the hot and cold queue lengths (for metrics).
	QueueDepths() (hot, cold int)
}

// Store is what the poller needs from a store: pending rows, and MarkDead
// for rows that cannot be decoded.
type Store interface {
	core.PendingSource
	MarkDead(ctx context.Context, eventID string, errMsg string) (bool, error)
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

// PollOnce runs one cycle: if the cold queue has room, read up to
// BatchSize due rows and enqueue those not already in flight until the
// queue is full. Rows that fail to decode are marked DEAD with the reason.
func (p *Poller) PollOnce(ctx context.Context) (Result, error) {
	p.cycleMu.Lock()
	defer p.cycleMu.Unlock()
	var res Result
	hot, cold := p.queue.QueueDepths()
	p.cfg.Metrics.QueueDepths(hot, cold)
	room := p.queue.ColdRoom()
	if room <= 0 {
		res.Full = true
		return res, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
	defer cancel()
	now := p.cfg.Now()
	recs, err := p.store.PollPending(ctx, now, p.cfg.SkipRecent, p.cfg.BatchSize)
	if err != nil {
		return res, err
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
			if p.markDead(ctx, rec, err) {
				res.Dead++
			}
			continue
		}
		if !p.queue.EnqueueCold(env, rec.Attempts) {
			if p.queue.ColdRoom() <= 0 { // full: the rest waits for the next cycle
				res.Skipped += len(recs) - i
				break
			}
			res.Skipped++
			continue
		}
		res.Enqueued++
	}
	return res, nil
}

// markDead records an undecodable row as DEAD and reports whether it could.
func (p *Poller) markDead(ctx context.Context, rec core.Record, cause error) bool {
	if _, err := p.store.MarkDead(ctx, rec.ID, cause.Error()); err != nil {
		p.log.Error("cannot mark undecodable event DEAD", slog.String("event_id", rec.ID), slog.String("error", err.Error()))
		return false
	}
	p.cfg.Metrics.DispatchDead()
	p.log.Error("undecodable event marked DEAD", slog.String("event_id", rec.ID),
		slog.String("event_type", rec.Type), slog.String("error", cause.Error()))
	return true
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
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		res, err := p.PollOnce(ctx)
		p.report(res, err)
		next := p.cfg.Interval
		if err == nil && res.Enqueued > 0 && res.Read == p.cfg.BatchSize || res.Full {
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
	case p.failing:
		p.failing = false
		p.log.Info("poller recovered")
	}
	if err == nil && res.Enqueued+res.Dead > 0 {
		p.log.Debug("poll cycle", slog.Int("read", res.Read), slog.Int("enqueued", res.Enqueued),
			slog.Int("skipped", res.Skipped), slog.Int("dead", res.Dead))
	}
}
