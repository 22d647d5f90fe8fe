// Package ratelog logs a recurring condition at most once per interval,
// with the number of occurrences since the last line, so an incident
// produces a handful of lines instead of one per event.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter rate-limits one kind of log line. The zero value logs every
// occurrence; use New. It is safe for concurrent use.
type Limiter struct {
	mu       sync.Mutex
	interval time.Duration
	last     time.Time
	count    int
}

// New returns a limiter that logs at most once per interval.
func New(interval time.Duration) *Limiter { return &Limiter{interval: interval} }

// Hit counts one occurrence and logs (with an "occurrences" attribute)
// when the interval has passed since the last line.
func (r *Limiter) Hit(log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	if n, due := r.Take(time.Now()); due {
		log.LogAttrs(context.Background(), level, msg, append(attrs, slog.Int("occurrences", n))...)
	}
}

// Take counts one occurrence at now and reports whether a line is due
// (the interval has passed since the last one, or there was none), with
// the occurrences it covers: this one and those since the last line.
// The caller logs the line; Hit is Take and the line.
func (r *Limiter) Take(now time.Time) (n int, due bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		return 0, false
	}
	n = r.count
	r.count, r.last = 0, now
	return n, true
}

// Flush starts a new interval at now, as for a line logged whatever the
// rate, and returns the occurrences since the last line.
func (r *Limiter) Flush(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.count
	r.count, r.last = 0, now
	return n
}
