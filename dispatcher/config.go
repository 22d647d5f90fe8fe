package dispatcher

import (
	"log/slog"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/retry"
)

// Defaults of [Config] (spec §15 where it names them).
const (
	DefaultWorkers       = 4
	DefaultHotCapacity   = 1000
	DefaultColdCapacity  = 1000
	DefaultMaxAttempts   = retry.DefaultMaxAttempts
	DefaultStatusTimeout = 5 * time.Second
)

// Config tunes a [Dispatcher]. The zero value takes every default.
type Config struct {
	// Workers is the number of goroutines running listeners, which is also
	// the maximum number of events processed at once. Defaults to 4.
	Workers int
	// HotCapacity bounds the queue fed after commit. When it is full the
	// event stays NEW in the database for the poller. Defaults to 1000.
	HotCapacity int
	// ColdCapacity bounds the queue fed by the poller and by in-process
	// retries. Defaults to 1000.
	ColdCapacity int
	// MaxAttempts is how many failed deliveries make an event DEAD.
	// Defaults to 10.
	MaxAttempts int
	// Retry computes the delay before the next attempt. Defaults to
	// retry.Exponential{} (200 ms base, 60 s max, jitter 0.5–1.5).
	Retry retry.Policy
	// RetryCapacity bounds how many failed events wait in memory for their
	// in-process retry timer; beyond it the database row (RETRY with its
	// available_at) is the only copy and the poller retries it. Defaults to
	// ColdCapacity. Set -1 to leave every retry to the poller.
	RetryCapacity int
	// InFlightTTL lets an in-flight entry older than this be taken again
	// (recovery from a stuck listener). Zero, the default, means no TTL.
	InFlightTTL time.Duration
	// StatusTimeout bounds each status write (DONE/RETRY/DEAD). Defaults to 5 s.
	StatusTimeout time.Duration
	// Logger receives the dispatcher's logs; payloads and header values are
	// never logged. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives the dispatch signals. Defaults to core.NopMetrics{}.
	Metrics core.Metrics
	// Now is the clock used for retry times. Defaults to time.Now.
	Now func() time.Time
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
		c.RetryCapacity = c.ColdCapacity
	}
	if c.StatusTimeout == 0 {
		c.StatusTimeout = DefaultStatusTimeout
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

func (c Config) validate() error {
	switch {
	case c.Workers < 1:
		return &core.ConfigError{Field: "dispatcher.Workers", Msg: "must be at least 1"}
	case c.HotCapacity < 1:
		return &core.ConfigError{Field: "dispatcher.HotCapacity", Msg: "must be at least 1"}
	case c.ColdCapacity < 1:
		return &core.ConfigError{Field: "dispatcher.ColdCapacity", Msg: "must be at least 1"}
	case c.MaxAttempts < 1:
		return &core.ConfigError{Field: "dispatcher.MaxAttempts", Msg: "must be at least 1"}
	case c.RetryCapacity < -1:
		return &core.ConfigError{Field: "dispatcher.RetryCapacity", Msg: "must be -1 (disabled) or positive"}
	case c.InFlightTTL < 0:
		return &core.ConfigError{Field: "dispatcher.InFlightTTL", Msg: "must not be negative"}
	case c.StatusTimeout < 0:
		return &core.ConfigError{Field: "dispatcher.StatusTimeout", Msg: "must not be negative"}
	}
	return nil
}
