package relay

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
)

// BreakerConfig configures a [Breaker]. The zero value is valid: every
// field has a documented default.
type BreakerConfig struct {
	// Name identifies the downstream in log lines, e.g. "nats jetstream
	// nats://127.0.0.1:4222". Default "broker".
	Name string
	// ProbeInterval is how often, during an outage, one event is let
	// through to try the broker again; the others are put off at once,
	// without waiting on the broker. Default 1 s.
	ProbeInterval time.Duration
	// RetryAfter is how long an event put off during an outage waits
	// before it is delivered again (core.UnavailableError.After). Default
	// 2 s. Events put off come back through the poller, so a delivery
	// after the outage also waits for the poller's next poll.
	RetryAfter time.Duration
	// Logger receives one ERROR when an incident begins and one INFO
	// "broker recovered" line once publishes have gone through for
	// [Breaker.Settle] after its last outage ended (see [Breaker]).
	// Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Metrics, when set, receives the broker's state: up when the
	// Breaker is created, down when an outage begins, up when it ends.
	// Nil, the default, records nothing.
	Metrics Metrics
}

// Defaults of BreakerConfig.
const (
	DefaultProbeInterval = time.Second
	DefaultRetryAfter    = 2 * time.Second
)

// Breaker keeps a relay from hammering a broker that is down and from
// charging the events attempts for it. A relay asks [Breaker.Allow]
// before it publishes; it reports a publish that failed because the broker
// could not be reached with [Breaker.Down] (which returns the
// [core.Unavailable] error to return from the listener, so the dispatcher
// puts the event off without counting an attempt) and a publish the broker
// acknowledged with [Breaker.Up], or both through the [Attempt] it took
// when the publish started. A publish the broker refused for the
// event's own sake (no stream for the subject, a message too large) is
// neither: it is a normal failure, retried and counted.
//
// The first success after an outage ends it: events go to the broker
// again at once. The log counts incidents rather than outages, so a link
// that fails and recovers every few seconds (a latency straddling the
// relay's ack timeout) does not log a pair of lines each time: an
// incident logs one ERROR when its first outage begins and one INFO
// "broker recovered" line once no outage has begun for Settle (10
// ProbeIntervals, 30 s at most: 10 s by default) after its last one
// ended, with the incident's length from its first failure to its last
// recovery ("outage"), its outages ("outages") and how many times an
// event was put off ("put_offs"; an event put off again at each of its
// deliveries counts each time). An outage beginning within Settle of the
// previous one's end continues the incident: a DEBUG line, no ERROR.
// Metrics, when set, see every outage. Retire logs a pending "recovered"
// line at once, or ends an incident under way with a line of its own. During an outage one event per ProbeInterval is let
// through to try the broker; the others are put off at once.
//
// A Breaker is safe for concurrent use.
type Breaker struct {
	cfg BreakerConfig

	mu        sync.Mutex
	down      bool
	since     time.Time // when the outage began
	lastErr   error     // the failure that began or last continued the outage
	nextProbe time.Time // when the next event may try the broker
	putOffs   int64     // times an event was put off during this incident
	outages   uint64    // outages begun so far; the current one's number while down
	ended     uint64    // outages ended so far
	retired   bool      // Retire was called: nothing more is reported to Metrics
	quiet     bool      // the incident under way began once retired: it logs at DEBUG

	// The incident: outages each beginning within Settle of the previous
	// one's end, logged as one.
	incSince   time.Time                               // when its first outage began
	incOutages int                                     // its outages so far
	lastUp     time.Time                               // when its last outage ended
	settling   func() bool                             // stops the timer logging its "recovered" line; nil: none armed
	settleGen  uint64                                  // incremented whenever that timer is stopped or re-armed
	afterFunc  func(time.Duration, func()) func() bool // time.AfterFunc, returning Stop; tests replace it
}

// Settle returns how long publishes must go through after an outage
// before the Breaker logs the incident's "broker recovered" line: 10
// ProbeIntervals, 30 s at most.
func (b *Breaker) Settle() time.Duration { return min(10*b.cfg.ProbeInterval, maxSettle) }

// maxSettle bounds Breaker.Settle.
const maxSettle = 30 * time.Second

// afterFunc runs f after d on its own goroutine, returning the function
// that stops it.
func afterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// NewBreaker returns a Breaker. It returns an error wrapping
// core.ErrInvalidConfig for a negative duration or a Logger without a
// handler (the zero slog.Logger).
func NewBreaker(cfg BreakerConfig) (*Breaker, error) {
	if cfg.ProbeInterval < 0 || cfg.RetryAfter < 0 {
		return nil, fmt.Errorf("%w: relay breaker: ProbeInterval and RetryAfter must not be negative (got %v, %v)",
			core.ErrInvalidConfig, cfg.ProbeInterval, cfg.RetryAfter)
	}
	if cfgpath.NoHandler(cfg.Logger) {
		return nil, fmt.Errorf("%w: relay breaker: Logger %s", core.ErrInvalidConfig, cfgpath.NoHandlerMsg)
	}
	if cfg.Name == "" {
		cfg.Name = "broker"
	}
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics != nil {
		cfg.Metrics.BrokerUp(cfg.Name, true)
	}
	return &Breaker{cfg: cfg, afterFunc: afterFunc}, nil
}

// Allow returns nil when the caller may publish: no outage, or this
// caller is the probe of the outage's next ProbeInterval. Otherwise it
// returns the core.Unavailable error to return from the listener.
func (b *Breaker) Allow() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.down {
		return nil
	}
	now := b.cfg.Now()
	if !now.Before(b.nextProbe) {
		b.nextProbe = now.Add(b.cfg.ProbeInterval)
		return nil
	}
	b.putOffs++
	return core.Unavailable(fmt.Errorf("%s unreachable since %s: %w", b.cfg.Name, b.since.UTC().Format(time.RFC3339), b.lastErr), b.cfg.RetryAfter)
}

// Down records that the broker cannot be reached now (a failed publish,
// a connection seen down before publishing) and returns the
// core.Unavailable error wrapping err to return from the listener. The
// first failure of an outage logs an ERROR. A relay reports the failure
// of a publish it started with [Breaker.Attempt] through the Attempt's
// Down instead.
func (b *Breaker) Down(err error) error { return b.fail(err, 0, false) }

// fail records a failure (see Down); with fenced, a failure while no
// outage is under way begins one only if no outage ended since the
// failed publish started (ended is the count then).
func (b *Breaker) fail(err error, ended uint64, fenced bool) error {
	b.mu.Lock()
	if fenced && !b.down && b.ended != ended {
		// The publish started before an outage that has ended since:
		// its failure belongs to that outage.
		b.mu.Unlock()
		return core.Unavailable(err, b.cfg.RetryAfter)
	}
	now := b.cfg.Now()
	b.lastErr = err
	first, again := !b.down, false
	if first {
		b.down, b.since = true, now
		b.outages++
		b.nextProbe = now.Add(b.cfg.ProbeInterval)
		if b.cfg.Metrics != nil && !b.retired {
			b.cfg.Metrics.BrokerUp(b.cfg.Name, false)
		}
		if again = b.settling != nil; again {
			// The incident's last outage ended less than Settle ago: this
			// one continues it.
			b.stopSettling()
		} else {
			b.incSince, b.incOutages, b.putOffs, b.quiet = now, 0, 0, b.retired
		}
		b.incOutages++
	}
	b.putOffs++
	quiet := b.quiet
	b.mu.Unlock()
	switch {
	case first && again:
		b.cfg.Logger.LogAttrs(context.Background(), slog.LevelDebug,
			"relay: broker unreachable again soon after it answered; the incident goes on",
			slog.String("broker", b.cfg.Name), slog.String("error", err.Error()))
	case first && quiet:
		// The relay is being closed: its publishes under way fail as
		// its connection closes, not because the broker went away.
		b.cfg.Logger.LogAttrs(context.Background(), slog.LevelDebug,
			"relay: a publish under way at Close failed; put off",
			slog.String("broker", b.cfg.Name), slog.String("error", err.Error()))
	case first:
		b.cfg.Logger.LogAttrs(context.Background(), slog.LevelError,
			"relay: broker unreachable; events are put off without charging attempts until it answers again",
			slog.String("broker", b.cfg.Name), slog.String("error", err.Error()),
			slog.Duration("probe_interval", b.cfg.ProbeInterval), slog.Duration("retry_after", b.cfg.RetryAfter))
	}
	return core.Unavailable(err, b.cfg.RetryAfter)
}

// Up records a publish the broker acknowledged. It ends an outage, with
// one INFO line. A relay whose answers can arrive after a failure of
// another publish was seen uses [Breaker.Attempt] instead.
func (b *Breaker) Up() { b.up(0, false) }

// Attempt marks the start of one publish. Report the broker's answer to
// it (an ack, or a refusal for the message's own sake) with the
// returned Attempt's Up instead of [Breaker.Up], and its failure to reach
// the broker with the Attempt's Down instead of [Breaker.Down].
//
// The difference: an outcome tells about the broker only from when the
// publish started. An answer to a publish that was already under way
// when an outage began does not end that outage. Such an answer was
// received before the failure that began the outage was seen (a client
// may hand over a confirm, then notice that the connection ended; on a
// loaded machine the goroutine that waited for the confirm can run after
// the one that saw the end), so it says nothing about the broker now. A
// publish started during the outage, such as its probe, ends it. Likewise
// the failure of a publish that was under way when an outage ended (its
// ack lost in that outage, its timeout passing after another publish's
// ack) belongs to the outage that ended: it puts the event off but begins
// no new outage, so one incident logs one ERROR and one "recovered" line.
func (b *Breaker) Attempt() Attempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Attempt{b: b, outage: b.outages, ended: b.ended}
}

// Attempt is one publish under way, from [Breaker.Attempt].
type Attempt struct {
	b      *Breaker
	outage uint64 // outages begun when the publish started
	ended  uint64 // outages ended when the publish started
}

// Up records the broker's answer to the publish: it ends the outage under
// way if that outage had already begun when the publish started.
func (a Attempt) Up() { a.b.up(a.outage, true) }

// Down records that the publish failed because the broker could not be
// reached and returns the core.Unavailable error wrapping err to return
// from the listener, as [Breaker.Down] does, except that it begins no
// outage when one ended since the publish started.
func (a Attempt) Down(err error) error { return a.b.fail(err, a.ended, true) }

// up ends an outage; with fenced, only the outage numbered outage. The
// incident's "recovered" line is logged Settle later unless another
// outage begins first, at once when the Breaker is retired.
func (b *Breaker) up(outage uint64, fenced bool) {
	b.mu.Lock()
	if !b.down || (fenced && b.outages != outage) {
		b.mu.Unlock()
		return
	}
	b.down, b.lastErr = false, nil
	b.ended++
	b.lastUp = b.cfg.Now()
	if b.cfg.Metrics != nil && !b.retired {
		b.cfg.Metrics.BrokerUp(b.cfg.Name, true)
	}
	if b.retired {
		b.logRecovered() // unlocks b.mu
		return
	}
	b.settleGen++
	gen := b.settleGen
	b.settling = b.afterFunc(b.Settle(), func() {
		b.mu.Lock()
		if b.settling == nil || b.settleGen != gen {
			b.mu.Unlock()
			return
		}
		b.settling = nil
		b.logRecovered()
	})
	b.mu.Unlock()
}

// stopSettling disarms the timer of the "recovered" line; b.mu held.
func (b *Breaker) stopSettling() {
	if b.settling != nil {
		b.settling()
		b.settling = nil
	}
	b.settleGen++
}

// incidentAttrs are the attributes of the line ending the incident at
// end; b.mu held.
func (b *Breaker) incidentAttrs(end time.Time) []slog.Attr {
	return []slog.Attr{slog.String("broker", b.cfg.Name), slog.Duration("outage", end.Sub(b.incSince)),
		slog.Int("outages", b.incOutages), slog.Int64("put_offs", b.putOffs)}
}

// logRecovered unlocks b.mu, held, and logs the "recovered" line of the
// incident whose last outage ended at b.lastUp.
func (b *Breaker) logRecovered() {
	level := slog.LevelInfo
	if b.quiet {
		level = slog.LevelDebug
	}
	attrs := b.incidentAttrs(b.lastUp)
	b.mu.Unlock()
	b.cfg.Logger.LogAttrs(context.Background(), level, "relay: broker recovered", attrs...)
}

// State reports whether an outage is under way, and since when.
func (b *Breaker) State() (down bool, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down, b.since
}

// Retire ends the Breaker's reports to BreakerConfig.Metrics, for a relay
// being closed: it reports the broker up, since a closed relay waits on
// no broker (so an alert on a relay closed during an outage ends), and
// nothing after, whatever the publishes still under way find; nor does
// an outage those publishes find log its ERROR (a DEBUG line instead):
// the relay's own close is what fails them. An incident whose
// "recovered" line waits for Settle logs it at once; one still under way
// logs an INFO line saying the relay closed during it. The Breaker itself
// goes on working. Calling it again does nothing.
func (b *Breaker) Retire() {
	b.mu.Lock()
	if b.retired {
		b.mu.Unlock()
		return
	}
	b.retired = true
	if b.cfg.Metrics != nil {
		b.cfg.Metrics.BrokerUp(b.cfg.Name, true)
	}
	switch {
	case b.settling != nil:
		b.stopSettling()
		b.logRecovered() // unlocks b.mu
	case b.down && !b.quiet:
		// The incident ends with the relay: say so, or its ERROR stays
		// without an end while the metric says up.
		b.quiet = true // what the publishes under way find is the close's doing
		attrs := b.incidentAttrs(b.cfg.Now())
		b.mu.Unlock()
		b.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo,
			"relay: closed during a broker outage; the events put off wait for the next relay", attrs...)
	default:
		b.mu.Unlock()
	}
}

// NewFull returns the Full of the relay this Breaker serves: named,
// logging, timed and reporting as the Breaker (its Name, Logger, Now,
// Metrics, RetryAfter and ProbeInterval); what says what refuses the
// messages, as FullConfig.What.
func (b *Breaker) NewFull(what string) *Full {
	return newFull(FullConfig{Name: b.cfg.Name, What: what, RetryAfter: b.cfg.RetryAfter, ProbeInterval: b.cfg.ProbeInterval,
		Logger: b.cfg.Logger, Now: b.cfg.Now, Metrics: b.cfg.Metrics}) // durations NewBreaker checked
}
