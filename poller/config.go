package poller

import (
	"log/slog"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
)

// Defaults of [Config].
const (
	DefaultInterval        = 5 * time.Second
	DefaultBatchSize       = 200
	DefaultSkipRecent      = time.Second
	DefaultBacklogInterval = 100 * time.Millisecond
	DefaultQueryTimeout    = 30 * time.Second
	DefaultReapInterval    = 30 * time.Second
	DefaultReapBatch       = 100
	// MaxBatchSize is the largest BatchSize and ReapBatch.
	MaxBatchSize = 10_000
	// maxReapBatchesPerCycle bounds the work of one reaping round.
	maxReapBatchesPerCycle = 10
)

// Config tunes a [Poller]. The zero value takes every default.
type Config struct {
	// Interval is the pause between cycles. Defaults to 5 s.
	Interval time.Duration
	// BacklogInterval is the longest pause after a cycle that found the
	// cold queue full: the dispatcher wakes the poller as soon as its
	// workers drained the queue to half (and its MaxHeldBytes budget has
	// room for an event of the usual size), so a backlog (after overload
	// or a restart) drains at worker speed; this pause only bounds the
	// wait when that notice cannot come (a queue of another kind). A cycle
	// that filled its whole batch with new events is followed by the next
	// at once. Defaults to 100 ms; it is capped at Interval.
	BacklogInterval time.Duration
	// BatchSize is the most new rows a cycle asks for. Defaults to 200;
	// at most MaxBatchSize.
	// A cycle that also takes the rows this node already holds (mostly
	// the oldest, so they come first) asks for as many more as it holds
	// and skips them, events waiting on a retry or delay timer (whose rows
	// are not due) left out: at most twice BatchSize in its first claim,
	// past every row held in the claim that may follow when this node's
	// own rows go on beyond them (a burst its hot queue dropped). Held
	// rows such a claim does not read (an event finishing meanwhile, one
	// the hot queue took after rows it dropped) let it take as many new
	// rows more.
	BatchSize int
	// SkipRecent leaves rows younger than this to the hot path; a row
	// published with a later due time (a delayed event) is claimed as soon
	// as it is due. Defaults to 1 s; set a negative value to skip nothing.
	SkipRecent time.Duration
	// QueryTimeout bounds each cycle's database work. Defaults to 30 s.
	QueryTimeout time.Duration
	// ReapInterval is how often expired leases are released (claims take
	// over expired leases anyway; reaping keeps the table truthful for
	// operators), on a schedule of its own, also between polls when it is
	// shorter than Interval. The first reaping comes ReapInterval after
	// Start. Defaults to 30 s; negative disables reaping. At the same
	// pace the poller counts the blocked ordering keys of each store that
	// delivers in order, for a Metrics implementing core.OrderMetrics.
	ReapInterval time.Duration
	// ReapBatch is the most leases released per statement, so no reaping
	// transaction runs long. Defaults to 100; at most MaxBatchSize.
	ReapBatch int
	// Selector chooses the store polled next when the poller serves
	// several stores (see [NewMulti]): core.RoundRobin (one batch from each
	// store in turn, the default) or core.DrainFirst (stay on a store until
	// a poll yields nothing), or your own policy. A nil value of a
	// selector type (a nil pointer) is refused; a selector that panics
	// gets round-robin order for that poll.
	Selector core.Selector
	// Logger receives the poller's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives ColdEnqueued (via the queue), DispatchDead for
	// undecodable rows, QueueDepths and OldestLag: every poll, also one
	// skipped because the cold queue is full, whose OldestLag is the age
	// now of the oldest row the last claim found while the dispatcher
	// still holds it, and is not reported once it let that row go (no
	// query is made for it). Defaults to core.NopMetrics{}.
	Metrics core.Metrics
	// Observer, when set, sees every claim (core.Observer.Claimed). Nil
	// means none.
	Observer core.Observer
	// Now is the clock of the leases the poller writes and of due times.
	// It must agree with the dispatcher's (dispatcher.Config.Now), which
	// judges those leases. Defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.BacklogInterval == 0 {
		c.BacklogInterval = DefaultBacklogInterval
	}
	if c.Interval > 0 && c.BacklogInterval > c.Interval { // a negative Interval is reported alone
		c.BacklogInterval = c.Interval
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.SkipRecent == 0 {
		c.SkipRecent = DefaultSkipRecent
	} else if c.SkipRecent < 0 {
		c.SkipRecent = 0
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.ReapInterval == 0 {
		c.ReapInterval = DefaultReapInterval
	}
	if c.ReapBatch == 0 {
		c.ReapBatch = DefaultReapBatch
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = core.NopMetrics{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every invalid field of c, after the defaults are
// applied, at once: each problem is a *core.ConfigError (wrapping
// core.ErrInvalidConfig) naming its field ("BatchSize"), joined with
// errors.Join. New and NewMulti run it; outbox.New and tenant.New run it
// before they touch the database, naming the fields "Poller.BatchSize".
func (c Config) Validate() error { return c.withDefaults().validate() }

func (c Config) validate() error {
	var p cfgpath.Collector
	p.Duration("Interval", c.Interval)
	p.Duration("BacklogInterval", c.BacklogInterval)
	p.Count("BatchSize", c.BatchSize, MaxBatchSize)
	p.Duration("QueryTimeout", c.QueryTimeout)
	p.Count("ReapBatch", c.ReapBatch, MaxBatchSize)
	p.Duration("ReapInterval", max(c.ReapInterval, 0)) // negative disables reaping
	p.NilValue("Selector", c.Selector)
	p.NilValue("Metrics", c.Metrics)
	p.NilValue("Observer", c.Observer)
	p.Logger("Logger", c.Logger)
	return p.Err()
}
