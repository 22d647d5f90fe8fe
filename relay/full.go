package relay

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
)

// MaxFullKeys bounds how many keys refused by full destinations a [Full]
// remembers. Beyond it a refused event is still put off, uncharged, but
// its key is not remembered, so its later acceptance does not count
// towards ending its destination's incident.
const MaxFullKeys = 4096

// FullConfig configures a [Full]. The zero value is valid: every field
// has a documented default.
type FullConfig struct {
	// Name identifies the broker in log lines, as BreakerConfig.Name.
	// Default "broker".
	Name string
	// What says what refuses the messages, in the ERROR line, e.g.
	// "stream full (Discard: DiscardNew)". Default "destination full".
	What string
	// RetryAfter is how long an event put off waits before it is
	// delivered again (core.UnavailableError.After). Default
	// DefaultRetryAfter (2 s).
	RetryAfter time.Duration
	// Logger receives one ERROR when a destination's incident begins and
	// one INFO when it ends. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Metrics, when set, receives the number of full destinations at
	// every change (Metrics.FullDestinations, with Name as the broker).
	// Nil, the default, records nothing.
	Metrics Metrics
	// ProbeInterval is how often one event of a refused key (a subject,
	// an exchange and routing key) is let through to try its destination
	// again ([Full.Allow]); the key's other events are put off at once,
	// without a publish, so a destination full for long is not sent
	// every waiting event at each retry (a RabbitMQ message routed to
	// several queues, one of them full, reaches the others at each
	// publish). Default DefaultProbeInterval (1 s).
	ProbeInterval time.Duration
	// Forget is how long a refused key is remembered while no event of it
	// comes by (refused, put off or accepted): its event went through another node
	// sharing the database, say, or is gone (purged, or marked DEAD by
	// an operator). A destination none of whose remembered keys was
	// refused for that long ends its incident, with an INFO line saying
	// so, so that its metric and alert do not stay on for ever. Default
	// DefaultFullForget.
	Forget time.Duration
}

// DefaultFullForget is the default of FullConfig.Forget: many times the
// interval at which an event put off comes back (RetryAfter and a poll).
const DefaultFullForget = time.Minute

// Full keeps a relay from charging attempts to the events of a
// destination that refuses messages for want of room while the broker
// is up: a JetStream stream full with Discard: DiscardNew, a RabbitMQ
// queue full with overflow reject-publish (which nacks). That is no
// outage: the broker answers, and its other destinations take their
// messages, so a [Breaker] must not put every event off. Instead the
// refused event alone is put off ([Full.Refused] returns the
// core.Unavailable error to return from the listener), and the later
// events of its key try one per ProbeInterval, the others put off without
// a publish ([Full.Allow]), until room is made (a consumer catches up, a
// purge, an age limit).
//
// Each destination's incident logs one ERROR when its first event is
// refused and one INFO "relay: full destination takes messages again",
// with how long it was full and how many times an event was put off
// ("put_offs"), once every key (a subject, an exchange and routing key)
// refused meanwhile was accepted again ([Full.Accepted]), or none of
// them was refused again for FullConfig.Forget. So a destination at its
// limit does not log a line per event it refuses, nor per key. What a
// destination is, the relay says: for JetStream the stream, for RabbitMQ
// the exchange and routing key (a nack does not name the queue that
// refused), so there one full queue bound to many routing keys is as many
// destinations. But an
// incident ends as soon as its last refused key is accepted: a
// destination whose consumer frees room one message at a time, refusing
// a single key, ends one incident and begins the next (an INFO and an
// ERROR, the metric 0 then 1) each time a probe finds the room just
// freed.
//
// A Full is safe for concurrent use.
type Full struct {
	cfg FullConfig

	// any is set while a key is remembered, so that an accepted message
	// costs one atomic load when nothing is full.
	any atomic.Bool

	// refusals counts every refusal (Refused): a publish remembers the
	// count when it starts (Mark), and its acceptance ends nothing a
	// refusal after that began (AcceptedSince).
	refusals atomic.Uint64

	mu      sync.Mutex
	keys    map[string]*fullKey      // refused key -> its destination and last refusal
	dests   map[string]*fullIncident // destination -> its incident
	naming  map[string]int64         // keys whose destination is being asked -> events put off meanwhile
	retired bool                     // Retire was called: nothing more is reported to Metrics
	sweep   *time.Timer              // runs forget while keys are remembered
}

// fullKey is a remembered refused key.
type fullKey struct {
	dest      string
	last      time.Time // the last time an event of it came by
	nextProbe time.Time // when the next event of it may try the destination
	err       error     // its last refusal
	refusal   uint64    // the Full's refusal count at its last refusal
}

// fullIncident is one destination's time full.
type fullIncident struct {
	since   time.Time
	last    time.Time // its last refusal
	keys    int       // remembered keys refused and not accepted since
	putOffs int64     // events put off because the destination was full
}

// NewFull returns a Full configured by cfg, with defaults for unset
// fields. It returns an error wrapping core.ErrInvalidConfig for a
// negative duration or a Logger without a handler (the zero slog.Logger).
func NewFull(cfg FullConfig) (*Full, error) {
	if cfg.RetryAfter < 0 || cfg.ProbeInterval < 0 || cfg.Forget < 0 {
		return nil, fmt.Errorf("%w: relay full: RetryAfter, ProbeInterval and Forget must not be negative (got %v, %v, %v)",
			core.ErrInvalidConfig, cfg.RetryAfter, cfg.ProbeInterval, cfg.Forget)
	}
	if cfgpath.NoHandler(cfg.Logger) {
		return nil, fmt.Errorf("%w: relay full: Logger %s", core.ErrInvalidConfig, cfgpath.NoHandlerMsg)
	}
	return newFull(cfg), nil
}

// newFull is NewFull for a cfg whose durations are not negative.
func newFull(cfg FullConfig) *Full {
	if cfg.Name == "" {
		cfg.Name = "broker"
	}
	if cfg.What == "" {
		cfg.What = "destination full"
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Forget <= 0 {
		cfg.Forget = DefaultFullForget
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	f := &Full{cfg: cfg, keys: make(map[string]*fullKey), dests: make(map[string]*fullIncident), naming: make(map[string]int64)}
	f.report()
	return f
}

// Refused records an event put off because the destination of key was
// full, with err the broker's answer, and returns the core.Unavailable
// error wrapping err to return from the listener. destination names the
// destination in the log (a stream asked of the broker's API, say); it is
// called only for a key not refused yet in an incident, once at a time
// per key (the events of that key refused meanwhile do not wait for it),
// and should be bounded in time. Keys of one destination share its
// incident.
func (f *Full) Refused(key string, err error, destination func() string) error {
	refusal := f.refusals.Add(1)
	f.mu.Lock()
	if k, ok := f.keys[key]; ok {
		now := f.came(k)
		f.dests[k.dest].putOffs++
		k.nextProbe, k.err, k.refusal = now.Add(f.cfg.ProbeInterval), err, refusal
		f.mu.Unlock()
		return core.Unavailable(err, f.cfg.RetryAfter)
	}
	if _, ok := f.naming[key]; ok {
		f.naming[key]++
		f.mu.Unlock()
		return core.Unavailable(err, f.cfg.RetryAfter)
	}
	f.naming[key] = 1
	f.mu.Unlock()

	name := destination()
	f.mu.Lock()
	putOffs := f.naming[key]
	delete(f.naming, key)
	now := f.cfg.Now()
	inc, ongoing := f.dests[name]
	if !ongoing {
		inc = &fullIncident{since: now}
		f.dests[name] = inc
	}
	inc.putOffs += putOffs
	inc.last = now
	if len(f.keys) < MaxFullKeys {
		f.keys[key] = &fullKey{dest: name, last: now, nextProbe: now.Add(f.cfg.ProbeInterval), err: err, refusal: refusal}
		inc.keys++
		f.any.Store(true)
	} // else its incident ends once none of its events came by for Forget
	if f.sweep == nil && !f.retired {
		f.sweep = time.AfterFunc(f.cfg.Forget, f.forget)
	}
	if !ongoing {
		f.report()
	}
	f.mu.Unlock()
	if !ongoing {
		f.cfg.Logger.LogAttrs(context.Background(), slog.LevelError,
			"relay: "+f.cfg.What+"; its events are put off without charging attempts until it has room, the others go on",
			slog.String("broker", f.cfg.Name), slog.String("destination", name), slog.String("key", key),
			slog.String("error", err.Error()), slog.Duration("retry_after", f.cfg.RetryAfter))
	}
	return core.Unavailable(err, f.cfg.RetryAfter)
}

// Allow returns nil when an event of key may be published: key was not
// refused (or was accepted since), or this event is the key's probe of
// the next ProbeInterval. Otherwise it returns the core.Unavailable error
// to return from the listener, wrapping the key's last refusal: the event
// is put off without a publish.
// Either way an event of a refused key keeps the key remembered (see
// FullConfig.Forget), also when it is put off for another reason
// afterwards, such as a broker outage. Call it before publishing, before
// the Breaker's Allow. It costs one atomic load while nothing is full.
func (f *Full) Allow(key string) error {
	if !f.any.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.keys[key]
	if !ok {
		return nil
	}
	now := f.came(k)
	if !now.Before(k.nextProbe) {
		k.nextProbe = now.Add(f.cfg.ProbeInterval)
		return nil
	}
	inc := f.dests[k.dest]
	inc.putOffs++
	return core.Unavailable(fmt.Errorf("relay: %s full since %s, its next try due in %v; last refusal: %w",
		k.dest, inc.since.UTC().Format(time.RFC3339), k.nextProbe.Sub(now).Round(time.Millisecond), k.err), f.cfg.RetryAfter)
}

// came records that an event of the remembered key k came by (see
// FullConfig.Forget) and returns the time. f.mu is held.
func (f *Full) came(k *fullKey) time.Time {
	now := f.cfg.Now()
	k.last, f.dests[k.dest].last = now, now
	return now
}

// Accepted records a message the broker took for key: when key was the
// last one refused of its destination's incident, the incident ends.
func (f *Full) Accepted(key string) { f.accepted(key, math.MaxUint64) }

// Mark returns what a publish about to start passes to AcceptedSince
// once it is accepted. Call it before publishing (after Allow).
func (f *Full) Mark() uint64 { return f.refusals.Load() }

// AcceptedSince is Accepted for a publish that started at mark (from
// Mark): it ends nothing when the key was refused since mark. An answer
// to a publish under way when a refusal came (confirmed on another
// channel, or before the refusal was seen) says nothing about room now;
// taken as proof, it ended the incident at once and the next refusal
// began another, so one full destination logged an ERROR and an INFO
// pair after pair.
func (f *Full) AcceptedSince(key string, mark uint64) { f.accepted(key, mark) }

func (f *Full) accepted(key string, mark uint64) {
	if !f.any.Load() {
		return
	}
	f.mu.Lock()
	k, ok := f.keys[key]
	if !ok || k.refusal > mark {
		f.mu.Unlock()
		return
	}
	ended := f.drop(key, k)
	f.mu.Unlock()
	if ended != nil {
		f.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "relay: full destination takes messages again",
			slog.String("broker", f.cfg.Name), slog.String("destination", k.dest),
			slog.Duration("full", f.cfg.Now().Sub(ended.since)), slog.Int64("put_offs", ended.putOffs))
	}
}

// drop forgets the remembered key and returns its destination's incident
// when that was its last key: the incident ended. f.mu is held.
func (f *Full) drop(key string, k *fullKey) *fullIncident {
	delete(f.keys, key)
	if len(f.keys) == 0 {
		f.any.Store(false)
	}
	inc := f.dests[k.dest]
	inc.keys--
	if inc.keys > 0 {
		return nil
	}
	f.end(k.dest)
	return inc
}

// end ends the incident of dest (reported to the Metrics). f.mu is held.
func (f *Full) end(dest string) {
	delete(f.dests, dest)
	f.report()
	if len(f.dests) == 0 && f.sweep != nil {
		f.sweep.Stop()
		f.sweep = nil
	}
}

// forget, run by f.sweep, forgets the keys none of whose events came by
// for Forget and ends the incidents left without keys.
func (f *Full) forget() {
	type ended struct {
		dest string
		inc  *fullIncident
	}
	var done []ended
	f.mu.Lock()
	if f.retired { // the relay closed: nothing to forget, nothing to log
		f.mu.Unlock()
		return
	}
	now := f.cfg.Now()
	for key, k := range f.keys {
		if now.Sub(k.last) >= f.cfg.Forget {
			if inc := f.drop(key, k); inc != nil {
				done = append(done, ended{k.dest, inc})
			}
		}
	}
	// An incident without remembered keys (refused beyond MaxFullKeys)
	// ends once none of its events came by for Forget.
	for dest, inc := range f.dests {
		if inc.keys == 0 && now.Sub(inc.last) >= f.cfg.Forget {
			f.end(dest)
			done = append(done, ended{dest, inc})
		}
	}
	if f.sweep != nil { // incidents go on
		f.sweep.Reset(f.cfg.Forget / 2)
	}
	f.mu.Unlock()
	for _, e := range done {
		f.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo,
			"relay: no event of a full destination came by for a while; its incident is over (its events may have gone through another node)",
			slog.String("broker", f.cfg.Name), slog.String("destination", e.dest),
			slog.Duration("full", now.Sub(e.inc.since)), slog.Int64("put_offs", e.inc.putOffs),
			slog.Duration("forget", f.cfg.Forget))
	}
}

// report gives the number of full destinations to the Metrics; f.mu is
// held, so that changes are reported in order.
func (f *Full) report() {
	if f.cfg.Metrics != nil && !f.retired {
		f.cfg.Metrics.FullDestinations(f.cfg.Name, len(f.dests))
	}
}

// Retire ends the Full's reports to FullConfig.Metrics, for a relay being
// closed: it reports no destination full, since a closed relay puts no
// event off (so an alert on a relay closed while a destination was full
// ends), and nothing after. The Full itself goes on working, but its
// incidents no longer end by themselves: the timer that forgot them is
// stopped (it kept the closed relay reachable, and logged an incident's
// end, up to a minute and a half after Close). Calling it again does
// nothing.
func (f *Full) Retire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.retired {
		return
	}
	f.retired = true
	if f.sweep != nil {
		f.sweep.Stop()
		f.sweep = nil
	}
	if f.cfg.Metrics != nil {
		f.cfg.Metrics.FullDestinations(f.cfg.Name, 0)
	}
}
