package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// PerKey logs a line once per key (an event type, a topic without a
// listener) for the first max keys; the lines of further keys share one
// Limiter. The set of keys remembered is bounded by max (plus the callers
// that race past the check). Use NewPerKey; it is safe for concurrent use.
type PerKey struct {
	max   int64
	seen  sync.Map // key -> struct{}
	count atomic.Int64
	over  *Limiter
}

// DefaultMaxKeys is the keys a PerKey of the outbox's and the inbox's
// dispatchers remembers: event types and topics without a listener.
const DefaultMaxKeys = 1000

// NewPerKey returns a PerKey remembering up to max keys, rate-limiting
// the lines of further keys to one per interval.
func NewPerKey(max int, interval time.Duration) *PerKey {
	return &PerKey{max: int64(max), over: New(interval)}
}

// Hit logs msg for key unless it was logged for key before; past max
// keys it logs through the shared Limiter, its message saying so.
func (p *PerKey) Hit(log *slog.Logger, level slog.Level, key, msg string, attrs ...slog.Attr) {
	if _, seen := p.seen.Load(key); seen {
		return
	}
	if p.count.Load() >= p.max {
		p.over.Hit(log, level, msg+" (too many such keys to log each once; rate-limited)", attrs...)
		return
	}
	if _, seen := p.seen.LoadOrStore(key, struct{}{}); !seen {
		p.count.Add(1)
		log.LogAttrs(context.Background(), level, msg, attrs...)
	}
}
