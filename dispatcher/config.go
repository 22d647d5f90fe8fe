package dispatcher

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/retry"
)

// Defaults of [Config].
const (
	DefaultWorkers         = 4
	DefaultHotCapacity     = 1000
	DefaultColdCapacity    = 1000
	DefaultMaxAttempts     = retry.DefaultMaxAttempts
	DefaultStatusTimeout   = 5 * time.Second
	DefaultListenerTimeout = 30 * time.Second
	DefaultListenerGrace   = time.Second
	DefaultLease           = 2 * time.Minute
	DefaultDoneBatchSize   = 256
	DefaultDoneFlushWindow = 25 * time.Millisecond
	// DefaultMaxHeldBytes is the default of Config.MaxHeldBytes: 64 MiB of
	// payloads and headers held in memory.
	DefaultMaxHeldBytes int64 = 64 << 20
	// MaxOwnerLen is the longest owner token the lease column holds.
	MaxOwnerLen = core.MaxOwnerLen
	// MaxWorkers is the most Workers a Config may ask for.
	MaxWorkers = 10_000
	// MaxCapacity is the most events HotCapacity, ColdCapacity and
	// RetryCapacity may bound: the queues are allocated up front.
	MaxCapacity = 1_000_000
	// MaxDoneBatchSize is the largest DoneBatchSize.
	MaxDoneBatchSize = 10_000
)

// Config tunes a [Dispatcher]. The zero value takes every default.
type Config struct {
	// Workers is the number of goroutines running listeners, which is also
	// the maximum number of events processed at once. Defaults to 4; at
	// most MaxWorkers.
	Workers int
	// HotCapacity bounds the queue fed after commit. When it is full the
	// event stays NEW in the database for the poller. Defaults to 1000; at
	// most MaxCapacity.
	HotCapacity int
	// ColdCapacity bounds the queue fed by the poller and by in-process
	// retries. Defaults to 1000; at most MaxCapacity.
	ColdCapacity int
	// MaxAttempts is how many failed deliveries make an event DEAD.
	// Defaults to 10.
	MaxAttempts int
	// Retry computes the delay before the next attempt (a nil value of a
	// policy type, such as retry.PolicyFunc(nil), is refused, and so is a
	// policy whose Validate method reports a problem, such as a
	// retry.Exponential with a negative delay; a policy that panics gets
	// retry.Exponential{}'s delay for that attempt). Defaults to
	// retry.Exponential{} (200 ms base, 60 s max, jitter 0.5–1.5).
	Retry retry.Policy
	// RetryCapacity bounds how many events wait in memory on a timer: failed
	// events until their retry, and delayed events (NotBefore) until they
	// are due. Their payloads and headers hold at most half of
	// MaxHeldBytes (any one event when none waits), so events delayed or
	// retried far ahead never leave the hot path and the poller no room.
	// Beyond either bound the database row is the only copy and the poller
	// delivers the event when it is due: its row's lease then ends when it
	// is due (not Lease after), so that this node's poller, which leaves
	// the rows of its own live leases out while it holds events, and any
	// other node's take it then. (A delayed event that found no timer only
	// after its insert, the timers filling meanwhile, keeps its lease.)
	// Defaults to ColdCapacity; at most
	// MaxCapacity. Set -1 to leave every retry and delayed event to the
	// poller.
	RetryCapacity int
	// Owner is this dispatcher's owner token, written as the lease holder
	// of every event it publishes or claims and checked by every status
	// write. It must be unique among running nodes; at most 64 bytes of
	// valid text, neither beginning nor ending with a space (MySQL
	// compares the lease column padded: "n1" and "n1 " would be one
	// owner). Defaults to a new random token per dispatcher (hostname +
	// ULID).
	Owner string
	// Lease is how long this node owns an event it published or claimed.
	// Another node takes an event over only after its lease expired, so a
	// crashed node's events wait up to Lease (plus a poll interval).
	// Defaults to 2 min. Must be greater than ListenerTimeout +
	// ListenerGrace + StatusTimeout, each taken after its default is
	// applied (36 s with the defaults), so that a listener call, the grace
	// of a hung listener and the status write all end while the lease
	// holds; otherwise New and NewMulti return an error wrapping
	// core.ErrInvalidConfig. What it exceeds them by bounds the clock skew
	// the nodes sharing a database tolerate (84 s with the defaults): a
	// lease is written with the holder's clock and judged expired with
	// the claimer's. An event that waited for a worker until its lease no
	// longer covers ListenerTimeout + StatusTimeout has it renewed to
	// Lease + StatusTimeout from then (one write, bounded by StatusTimeout,
	// through a store implementing core.LeaseExtender, as jdbcstore's
	// does) before its listener runs; one whose lease ran out, or that the
	// store cannot renew, is left for a new claim.
	Lease time.Duration
	// ListenerTimeout bounds each listener call through its ctx; a listener
	// that overruns it fails the delivery. Defaults to 30 s.
	ListenerTimeout time.Duration
	// ListenerGrace is how long after its timeout a listener that ignores
	// its ctx may still take to return. Past it the delivery is recorded as
	// failed (ErrListenerHung: RETRY, or DEAD after MaxAttempts) and a new
	// worker replaces the stuck one, so the pool never shrinks; the stuck
	// goroutine exits whenever the listener returns. Until then its event
	// stays held as if still running: its retry starts only once the
	// listener returned (in process when due, or by this node's poller,
	// which does not take the event meanwhile), so the event never runs in
	// two listener calls at once unless InFlightTTL lets it be taken again;
	// Close and RemoveStore wait for the listener as for any running one,
	// and the release of this node's leases leaves its row alone. Its row's
	// lease is renewed every quarter of Lease while the call runs (through
	// a store implementing core.LeaseExtender, as jdbcstore's does), so no
	// other node takes the event, or the events after it in order. A
	// listener that never returns keeps that one event (its payload and
	// headers counted in MaxHeldBytes) until the process ends. An ordered
	// event that goes DEAD this way under the skip policy frees its key at
	// once: the key's next event may run while the stuck call still does.
	// A watchdog that fires later than due by more than half of it (the
	// process was stopped or starved meanwhile, so the listener had no
	// time to see its ctx end) gives the listener one more ListenerGrace
	// first. Defaults to 1 s.
	ListenerGrace time.Duration
	// InFlightTTL lets an in-flight entry older than this be taken again
	// (recovery from a stuck listener): this dispatcher's poller or hot
	// path may then queue the event once more and a second run deliver it
	// while the first is still in its listener. The first run is then
	// stale: when it ends, its outcome (DONE, RETRY, DEAD or put off) is
	// discarded, not written, and the event stays with the newer run,
	// whose outcome stands; it is logged at WARN and counted as a lost
	// lease (core.Metrics.LeaseLost). A take that is undone before its
	// copy runs (the queue full, MaxHeldBytes, a lease too short to run
	// on) leaves the event to the first run, whose outcome is written. A
	// stale copy still waiting in a queue or on a retry timer, or for a
	// hung listener to return (see ListenerGrace), is dropped without
	// running. An event whose outcome is being written is not taken
	// again, however old. The age counts from when the event was taken
	// (or, for an in-process retry, from its RETRY write, which for a
	// listener hung past ListenerGrace is made when the watchdog gives up
	// on it). Zero, the default, means no TTL: an event is never taken
	// again while held.
	InFlightTTL time.Duration
	// StatusTimeout bounds each status write (DONE/RETRY/DEAD). Defaults to 5 s.
	// On SQLite a write that waits for another connection's write lock
	// sleeps in SQLite's busy handler, which the context cannot interrupt:
	// it may take up to the connection's busy timeout (10 s with
	// sqlite.Open) before it gives up.
	StatusTimeout time.Duration
	// DoneBatchSize is the most DONE writes coalesced into one UPDATE.
	// Defaults to 256; 1 writes every event on its own; at most
	// MaxDoneBatchSize.
	DoneBatchSize int
	// DoneFlushWindow is how long a started batch of DONE writes waits for
	// more events before it is written: larger batches mean fewer write
	// transactions competing with business transactions (on MySQL fewer
	// fsyncs, on SQLite fewer turns of the single write lock). It delays
	// the DONE write, never the listener, by at most this much. Defaults to
	// 25 ms (1 ms halved end-to-end throughput on SQLite in
	// cmd/outbox-bench); negative means no wait.
	DoneFlushWindow time.Duration
	// Logger receives the dispatcher's logs; payloads and header values are
	// never logged. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives the dispatch signals. Defaults to core.NopMetrics{}.
	Metrics core.Metrics
	// Observer, when set, sees every delivery attempt (its listeners run
	// with the context it returns) and every DONE write. Nil means none.
	Observer core.Observer
	// Now is the dispatcher's clock: retry times, and the leases it
	// judges (a claimed event whose lease, written by the poller or the
	// store on their own clock, would not cover its listener and the
	// outcome is not delivered: it is left for a claim after the lease
	// ends). It must agree with the clock of the poller
	// and of the stores it serves (outbox.New refuses a clock set on one
	// part only: set Config.Now there). Defaults to time.Now.
	Now func() time.Time
	// Unhandled is what happens to an event no listener is registered for
	// (no listener of its type and no RegisterAll listener). Whatever the
	// choice, one WARN is logged per event type and every such event is
	// counted (core.UnhandledMetrics). Defaults to UnhandledDone: the
	// event is marked DONE, as if delivered.
	Unhandled UnhandledPolicy
	// UnhandledDelay is how long an event is put off with UnhandledLeave
	// before it is looked at again, lengthened at random by up to a
	// quarter (so that the nodes' polls do not meet it in the same order
	// every round). Defaults to 1 min.
	UnhandledDelay time.Duration
	// MaxHeldBytes bounds the payload and header bytes of the events the dispatcher
	// holds in memory at once: queued (hot and cold), waiting on a retry or
	// delay timer, running, or waiting for their DONE write. The queue
	// capacities bound the number of events; this bounds their size (with
	// 1 MiB payloads the default capacities alone would allow about
	// 3 GiB). Beyond it an event takes the poller path exactly as with a
	// full queue: the hot path's hand-off is refused and counts a
	// HotDropped (with a rate-limited WARN naming the budget), the
	// poller's is refused, and the
	// poller claims only as many rows as fit at the recent average size
	// (before any event was seen, at the largest size an event may have),
	// none while not even one does, so it does not lease rows it cannot
	// hold. Events waiting on a timer hold at most half of it (see
	// RetryCapacity). An event larger than the budget left is still taken
	// when nothing else is held but events waiting on a timer, so it is
	// delivered. Payloads and headers (keys and values)
	// are counted, not the fixed cost of an event (about 1 KiB). Defaults to 64 MiB
	// (DefaultMaxHeldBytes); negative means no limit.
	MaxHeldBytes int64
}

func (c Config) withDefaults() Config {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.HotCapacity == 0 {
		c.HotCapacity = DefaultHotCapacity
	}
	if c.ColdCapacity == 0 {
		c.ColdCapacity = DefaultColdCapacity
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Retry == nil {
		c.Retry = retry.Exponential{}
	}
	if c.RetryCapacity == 0 {
		// Within bounds even when ColdCapacity is not: its error names
		// it alone, not also a field the user never set.
		c.RetryCapacity = min(max(c.ColdCapacity, 1), MaxCapacity)
	}
	if c.StatusTimeout == 0 {
		c.StatusTimeout = DefaultStatusTimeout
	}
	if c.ListenerTimeout == 0 {
		c.ListenerTimeout = DefaultListenerTimeout
	}
	if c.ListenerGrace == 0 {
		c.ListenerGrace = DefaultListenerGrace
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.DoneBatchSize == 0 {
		c.DoneBatchSize = DefaultDoneBatchSize
	}
	if c.DoneFlushWindow == 0 {
		c.DoneFlushWindow = DefaultDoneFlushWindow
	}
	if c.Owner == "" {
		c.Owner = ident.OwnerToken()
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
	if c.UnhandledDelay == 0 {
		c.UnhandledDelay = DefaultUnhandledDelay
	}
	if c.MaxHeldBytes == 0 {
		c.MaxHeldBytes = DefaultMaxHeldBytes
	}
	return c
}

// Validate reports every invalid field of c, after the defaults are
// applied, at once: each problem is a *core.ConfigError (wrapping
// core.ErrInvalidConfig) naming its field ("Workers"), joined with
// errors.Join. New and NewMulti run it; outbox.New and tenant.New run it
// before they touch the database, naming the fields "Dispatcher.Workers".
func (c Config) Validate() error { return c.withDefaults().validate() }

func (c Config) validate() error {
	var p cfgpath.Collector
	p.Count("Workers", c.Workers, MaxWorkers)
	p.Count("HotCapacity", c.HotCapacity, MaxCapacity)
	p.Count("ColdCapacity", c.ColdCapacity, MaxCapacity)
	p.AtLeast1("MaxAttempts", c.MaxAttempts)
	p.NilValue("Retry", c.Retry)
	p.Validated("Retry", c.Retry)
	p.NilValue("Metrics", c.Metrics)
	p.NilValue("Observer", c.Observer)
	p.Logger("Logger", c.Logger)
	if c.RetryCapacity < -1 || c.RetryCapacity > MaxCapacity {
		p.Field("RetryCapacity", fmt.Sprintf("must be -1 (disabled) or 1..%d", MaxCapacity))
	}
	p.Duration("InFlightTTL", c.InFlightTTL)
	p.Duration("StatusTimeout", c.StatusTimeout)
	p.Count("DoneBatchSize", c.DoneBatchSize, MaxDoneBatchSize)
	p.Duration("ListenerTimeout", c.ListenerTimeout)
	p.NotNegative("ListenerGrace", c.ListenerGrace)
	if need := cfgpath.Sum(c.ListenerTimeout, c.ListenerGrace, c.StatusTimeout); c.Lease <= need {
		p.Field("Lease", fmt.Sprintf("(%v) must exceed ListenerTimeout + ListenerGrace + StatusTimeout (%v)", c.Lease, need))
	}
	if len(c.Owner) > MaxOwnerLen || !utf8.ValidString(c.Owner) || strings.IndexByte(c.Owner, 0) >= 0 {
		p.Field("Owner", fmt.Sprintf("must be valid text of at most %d bytes", MaxOwnerLen))
	} else if strings.TrimSpace(c.Owner) != c.Owner {
		p.Field("Owner", "must not begin or end with a space (MySQL compares the lease column padded: \"n1\" and \"n1 \" would be one owner)")
	}
	if c.Unhandled > UnhandledDead {
		p.Field("Unhandled", fmt.Sprintf("unknown policy %d (want UnhandledDone, UnhandledLeave or UnhandledDead)", uint8(c.Unhandled)))
	}
	p.Duration("UnhandledDelay", c.UnhandledDelay)
	return p.Err()
}
