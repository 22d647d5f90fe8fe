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
	r.mu.Lock()
	r.count++
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.mu.Unlock()
		return
	}
	n := r.count
	r.count, r.last = 0, now
	r.mu.Unlock()
	log.LogAttrs(context.Background(), level, msg, append(attrs, slog.Int("occurrences", n))...)
}
