package dispatcher

import (
	"sync"
	"time"
)

// InFlight tracks the events a dispatcher holds (queued, running or waiting
// for an in-process retry) so the same event is never processed twice at
// once and the poller does not queue it again. It is safe for concurrent use.
type InFlight struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time
	ids map[string]time.Time
}

// NewInFlight returns a tracker. With ttl > 0 an entry older than ttl may be
// acquired again (recovery from a stuck worker).
func NewInFlight(ttl time.Duration, now func() time.Time) *InFlight {
	if now == nil {
		now = time.Now
	}
	return &InFlight{ttl: ttl, now: now, ids: make(map[string]time.Time)}
}

// TryAcquire takes id and reports true, or reports false if it is held.
func (t *InFlight) TryAcquire(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if since, held := t.ids[id]; held && (t.ttl <= 0 || now.Sub(since) < t.ttl) {
		return false
	}
	t.ids[id] = now
	return true
}

// Release drops id.
func (t *InFlight) Release(id string) {
	t.mu.Lock()
	delete(t.ids, id)
	t.mu.Unlock()
}

// Contains reports whether id is held (and not expired).
func (t *InFlight) Contains(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	since, held := t.ids[id]
	return held && (t.ttl <= 0 || t.now().Sub(since) < t.ttl)
}

// Len returns the number of held ids.
func (t *InFlight) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ids)
}
