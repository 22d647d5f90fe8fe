// Package cleanup runs the retention purge of the outbox table in the
// background: DONE rows older than one retention and DEAD rows older than a
// longer one are deleted in small batches, so the table does not grow
// forever and no delete runs long. NEW and RETRY rows are never touched.
package cleanup

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Defaults of [Config]: purge every hour, keep DONE rows a week and DEAD
// rows 30 days, delete at most 500 rows per statement.
const (
	DefaultInterval      = time.Hour
	DefaultDoneRetention = 7 * 24 * time.Hour
	DefaultDeadRetention = 30 * 24 * time.Hour
	DefaultBatchSize     = 500
	// DefaultPauseFactor makes a run wait as long after each batch as
	// the batch took: the purge holds the database at most half the time.
	DefaultPauseFactor = 1.0
)

// The placement of a started cleaner's runs (see Config.Interval).
const (
	// FirstRunWithin bounds the wait before the first run after Start.
	FirstRunWithin = time.Minute
	// IntervalJitter is the most a wait between runs differs from
	// Interval, as a fraction of it.
	IntervalJitter = 0.1
)

// Purger deletes rows past retention; *jdbcstore.Store implements it.
type Purger interface {
	Purge(ctx context.Context, o jdbcstore.PurgeOptions) (jdbcstore.PurgeResult, error)
}

// Config tunes a [Cleaner]. The zero value takes every default.
type Config struct {
	// Interval between runs. Defaults to 1 h.
	//
	// A started cleaner runs first at a random moment within
	// FirstRunWithin (or within Interval, when shorter) after Start, so a
	// service redeployed more often than Interval still purges; then
	// every Interval, lengthened or shortened at random by up to
	// IntervalJitter of it, so that nodes started together do not purge
	// in lockstep.
	Interval time.Duration
	// DoneRetention keeps DONE rows this long after they finished.
	// Defaults to 7 days.
	DoneRetention time.Duration
	// DeadRetention keeps DEAD rows this long after they died, so an
	// operator can replay them. Defaults to 30 days, or DoneRetention when
	// that is longer; must not be shorter than DoneRetention.
	DeadRetention time.Duration
	// BatchSize is the most rows deleted per statement, 1 to
	// jdbcstore.MaxPurgeBatch. Defaults to 500.
	//
	// On SQLite, whose one write lock publishers wait for in its busy
	// handler (sleeping 1, 2, 5 ms… before they try again), fewer and
	// longer batches cost publishers less throughput: each batch is a
	// hand-over of the lock that leaves it idle while they sleep. A batch
	// holds the lock about 4 µs per row (5000 rows: ~20 ms, the longest a
	// business transaction then waits).
	BatchSize int
	// PauseFactor paces a run: after each batch it waits PauseFactor
	// times as long as the batch took, so the purge keeps the database
	// busy at most 1/(1+PauseFactor) of the time and the application
	// keeps the rest, however fast the database is. 0 to
	// jdbcstore.MaxPauseFactor; set NoPause for back-to-back batches.
	// Defaults to DefaultPauseFactor.
	PauseFactor float64
	// NoPause runs the batches back to back (PauseFactor must then be 0).
	NoPause bool
	// MaxRate caps the rows a run deletes per second (0: no cap). A purge
	// costs publishers in proportion to how fast it deletes: set it to
	// about twice the peak publish rate (events per second) and the purge
	// keeps up with room to spare, catching up on a large backlog without
	// running faster than that.
	//
	// MaxRate and PauseFactor bound one node: nodes that each run a
	// cleaner purge the same rows at once, and together delete up to
	// their number times MaxRate and hold the database longer. Divide
	// MaxRate by the number of nodes running a cleaner, or run it on one
	// node only. (A batch whose rows another node deleted first is paced
	// as if this node had deleted them, so racing nodes do not spin.)
	MaxRate float64
	// Logger receives one INFO line per run that removed something.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when it implements core.OpsMetrics, receives Purged counts.
	Metrics core.Metrics
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.DoneRetention == 0 {
		c.DoneRetention = DefaultDoneRetention
	}
	if c.DeadRetention == 0 {
		c.DeadRetention = max(DefaultDeadRetention, c.DoneRetention)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.PauseFactor == 0 && !c.NoPause {
		c.PauseFactor = DefaultPauseFactor
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every invalid field of c, after the defaults are
// applied, at once: each problem is a *core.ConfigError (wrapping
// core.ErrInvalidConfig) naming its field ("BatchSize"), joined with
// errors.Join. New runs it; outbox.New runs it before it touches the
// database, naming the fields "Cleanup.BatchSize".
func (c Config) Validate() error { return c.withDefaults().validate() }

func (c Config) validate() error {
	var p cfgpath.Collector
	p.Duration("Interval", c.Interval)
	p.NotNegative("DoneRetention", c.DoneRetention)
	if c.DeadRetention < 0 {
		p.Field("DeadRetention", "must not be negative")
	} else if c.DeadRetention < c.DoneRetention {
		p.Field("DeadRetention", "must not be shorter than DoneRetention")
	}
	p.NilValue("Metrics", c.Metrics)
	p.Logger("Logger", c.Logger)
	if c.BatchSize < 1 || c.BatchSize > jdbcstore.MaxPurgeBatch {
		p.Field("BatchSize", fmt.Sprintf("must be 1..%d", jdbcstore.MaxPurgeBatch))
	}
	if !(c.PauseFactor >= 0 && c.PauseFactor <= jdbcstore.MaxPauseFactor) { // also refuses NaN
		p.Field("PauseFactor", fmt.Sprintf("must be 0..%d", jdbcstore.MaxPauseFactor))
	} else if c.NoPause && c.PauseFactor != 0 {
		p.Field("PauseFactor", "must be 0 with NoPause")
	}
	if !(c.MaxRate >= 0 && !math.IsInf(c.MaxRate, 1)) { // also refuses NaN
		p.Field("MaxRate", "must be a finite number of rows per second, at least 0")
	}
	return p.Err()
}

// Cleaner purges periodically. Create it with [New]; [Cleaner.Start] runs
// it in the background, [Cleaner.RunOnce] runs one purge.
type Cleaner struct {
	cfg Config
	p   Purger
	log *slog.Logger

	run *engine.Runner
	// rand returns a random fraction in [0, 1) (math/rand/v2.Float64;
	// tests set it).
	rand func() float64
}

// New returns a cleaner over p. A nil p, or a nil value of a pointer
// type (a nil *jdbcstore.Store), is a *core.ConfigError.
func New(p Purger, cfg Config) (*Cleaner, error) {
	if nilval.Is(p) {
		return nil, &core.ConfigError{Field: "purger", Msg: "must not be nil"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Cleaner{cfg: cfg, p: p, log: cfg.Logger.With(slog.String("component", "outbox.cleanup")),
		run: engine.NewRunner("cleanup"), rand: rand.Float64}, nil
}

// firstDelay is the wait before the first run after Start: a random
// point of the first FirstRunWithin, or of the first Interval when
// shorter.
func (c *Cleaner) firstDelay() time.Duration {
	return time.Duration(c.rand() * float64(min(c.cfg.Interval, FirstRunWithin)))
}

// nextDelay is the wait after a run: Interval, ±IntervalJitter of it at
// random, at most the largest Duration (a lengthened Interval near it
// wrapped negative: the next run came at once).
func (c *Cleaner) nextDelay() time.Duration {
	jitter := time.Duration((2*c.rand() - 1) * IntervalJitter * float64(c.cfg.Interval))
	if jitter > math.MaxInt64-c.cfg.Interval {
		return math.MaxInt64
	}
	return c.cfg.Interval + jitter
}

// RunOnce purges what is past retention now and logs what it removed. A
// nil ctx returns core.ErrNilContext.
func (c *Cleaner) RunOnce(ctx context.Context) (jdbcstore.PurgeResult, error) {
	if ctx == nil {
		return jdbcstore.PurgeResult{}, core.ErrNilContext
	}
	res, err := c.p.Purge(ctx, jdbcstore.PurgeOptions{
		DoneOlderThan: c.cfg.DoneRetention, DeadOlderThan: c.cfg.DeadRetention, BatchSize: c.cfg.BatchSize,
		PauseFactor: c.cfg.PauseFactor, MaxRate: c.cfg.MaxRate,
	})
	if res.Done+res.Dead > 0 {
		c.log.Info("purged rows past retention", slog.Int64("done", res.Done), slog.Int64("dead", res.Dead),
			slog.Int("statements", res.Batches), slog.Duration("done_retention", c.cfg.DoneRetention),
			slog.Duration("dead_retention", c.cfg.DeadRetention))
		if r, ok := c.cfg.Metrics.(core.OpsMetrics); ok {
			r.Purged(int(res.Done), int(res.Dead))
		}
	}
	return res, err
}

// Start runs a purge soon after Start (within FirstRunWithin), then
// every Interval (±IntervalJitter) until Close. It returns at once.
// Starting a running cleaner is an error wrapping core.ErrInvalidConfig;
// starting a closed one returns core.ErrClosed. A nil ctx returns
// core.ErrNilContext and starts nothing.
func (c *Cleaner) Start(ctx context.Context) error {
	return c.run.Start(ctx, func(ctx context.Context, stop <-chan struct{}) {
		// A purge is many short statements, each complete on its own:
		// Close interrupts one in progress, its current statement included
		// (rolled back: the rows it would have deleted go with a later purge).
		ctx, cancel := engine.UntilStop(ctx, stop)
		defer cancel()
		c.run.Pace(ctx, stop, c.firstDelay(), func(ctx context.Context, _ bool) time.Duration {
			c.runLogged(ctx)
			return c.nextDelay()
		})
	})
}

// Close ends the background runs and waits for the loop to exit: a purge
// in progress is cancelled, its current statement with it (each statement
// is atomic; what earlier ones deleted stays deleted). If ctx ends first, Close returns ctx's error; calling it again
// waits again. Close is final (Start then returns core.ErrClosed) and
// returns nil on a cleaner that never started. A nil ctx returns
// core.ErrNilContext and stops nothing.
func (c *Cleaner) Close(ctx context.Context) error { return c.run.Close(ctx) }

// runLogged is one background run: a failure is logged and retried at the
// next interval.
func (c *Cleaner) runLogged(ctx context.Context) {
	if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("purge failed; will try again at the next interval", slog.String("error", err.Error()))
	}
}
