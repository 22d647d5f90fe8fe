package relay

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-go/outbox/core"
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
}

// Full keeps a relay from charging attempts to the events of a
// destination that refuses messages for want of room while the broker
// is up: a JetStream stream full with Discard: DiscardNew, a RabbitMQ
// queue full with overflow reject-publish (which nacks). That is no
// outage: the broker answers, and its other destinations take their
// messages, so a [Breaker] must not put every event off. Instead the
// refused event alone is put off ([Full.Refused] returns the
// core.Unavailable error to return from the listener), until room is made
// (a consumer catches up, a purge, an age limit).
//
// Each destination's incident logs one ERROR when its first event is
// refused and one INFO "relay: full destination takes messages again",
// with how long it was full and how many times an event was put off
// ("put_offs"), once every key (a subject, an exchange and routing key)
// refused meanwhile was accepted again ([Full.Accepted]). So a
// destination at its limit, whose consumer frees room one message at a
// time, does not log a line per message.
//
// A Full is safe for concurrent use.
type Full struct {
	cfg FullConfig

	// any is set while a key is remembered, so that an accepted message
	// costs one atomic load when nothing is full.
	any atomic.Bool

	mu      sync.Mutex
	keys    map[string]string        // refused key -> its destination
	dests   map[string]*fullIncident // destination -> its incident
	naming  map[string]int64         // keys whose destination is being asked -> events put off meanwhile
	retired bool                     // Retire was called: nothing more is reported to Metrics
}

// fullIncident is one destination's time full.
type fullIncident struct {
	since   time.Time
	keys    int   // remembered keys refused and not accepted since
	putOffs int64 // events put off because the destination was full
}

// NewFull returns a Full configured by cfg, with defaults for unset fields.
func NewFull(cfg FullConfig) *Full {
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
	f := &Full{cfg: cfg, keys: make(map[string]string), dests: make(map[string]*fullIncident), naming: make(map[string]int64)}
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
	f.mu.Lock()
	if name, ok := f.keys[key]; ok {
		f.dests[name].putOffs++
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
	inc, ongoing := f.dests[name]
	if !ongoing {
		inc = &fullIncident{since: f.cfg.Now()}
		f.dests[name] = inc
	}
	inc.putOffs += putOffs
	if len(f.keys) < MaxFullKeys {
		f.keys[key] = name
		inc.keys++
		f.any.Store(true)
	} else if !ongoing {
		delete(f.dests, name) // nothing remembered would end it
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

// Accepted records a message the broker took for key: when key was the
// last one refused of its destination's incident, the incident ends.
func (f *Full) Accepted(key string) {
	if !f.any.Load() {
		return
	}
	f.mu.Lock()
	name, ok := f.keys[key]
	if !ok {
		f.mu.Unlock()
		return
	}
	delete(f.keys, key)
	if len(f.keys) == 0 {
		f.any.Store(false)
	}
	inc := f.dests[name]
	inc.keys--
	if inc.keys > 0 {
		f.mu.Unlock()
		return
	}
	delete(f.dests, name)
	f.report()
	f.mu.Unlock()
	f.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "relay: full destination takes messages again",
		slog.String("broker", f.cfg.Name), slog.String("destination", name),
		slog.Duration("full", f.cfg.Now().Sub(inc.since)), slog.Int64("put_offs", inc.putOffs))
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
// ends), and nothing after. The Full itself goes on working. Calling it
// again does nothing.
func (f *Full) Retire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.retired {
		return
	}
	f.retired = true
	if f.cfg.Metrics != nil {
		f.cfg.Metrics.FullDestinations(f.cfg.Name, 0)
	}
}
