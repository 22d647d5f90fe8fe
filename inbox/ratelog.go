package inbox

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog logs a recurring condition at most once per interval, with the
// number of occurrences since the last line.
type rateLog struct {
	mu       sync.Mutex
	interval time.Duration
	last     time.Time
	count    int
}

func (r *rateLog) hit(log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
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
