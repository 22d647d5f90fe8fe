// Package inflight tracks the events a dispatcher holds.
package inflight

import (
	"sync"
	"time"
)

// Tracker tracks the events a dispatcher holds (queued, running or waiting
// for an in-process retry) so the same event is never processed twice at
// once and the poller does not queue it again. It is safe for concurrent use.
type Tracker struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time
	ids map[string]time.Time

	// recent remembers the last finished ids (a ring), so a poller that
	// claimed a row just before its worker finished it cannot queue it
	// again right after the release.
	recent     map[string]time.Time // finished id → when
	recentRing []string
	recentNext int
}

// A tracker remembers at most recentFinished finished ids, each for at most
// recentWindow: long enough to cover a claim racing with the outcome write,
// short enough that an event replayed by an operator is taken again.
const (
	recentFinished = 4096
	recentWindow   = 5 * time.Second
)

// New returns a tracker. With ttl > 0 an entry older than ttl may be
// acquired again (recovery from a stuck worker).
func New(ttl time.Duration, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{ttl: ttl, now: now, ids: make(map[string]time.Time),
		recent: make(map[string]time.Time, recentFinished), recentRing: make([]string, recentFinished)}
}

// TryAcquire takes id and reports true, or reports false if it is held
// or was finished recently.
func (t *Tracker) TryAcquire(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if at, done := t.recent[id]; done {
		if now.Sub(at) < recentWindow {
			return false
		}
		delete(t.recent, id)
	}
	if since, held := t.ids[id]; held && (t.ttl <= 0 || now.Sub(since) < t.ttl) {
		return false
	}
	t.ids[id] = now
	return true
}

// Release drops id.
func (t *Tracker) Release(id string) {
	t.mu.Lock()
	delete(t.ids, id)
	t.mu.Unlock()
}

// Finish drops id after its final outcome (DONE or DEAD) was written and
// remembers it for a few seconds, so a stale copy from a claim that raced
// with the outcome write is not processed again.
func (t *Tracker) Finish(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ids, id)
	if old := t.recentRing[t.recentNext]; old != "" {
		delete(t.recent, old)
	}
	t.recentRing[t.recentNext] = id
	t.recent[id] = t.now()
	t.recentNext = (t.recentNext + 1) % len(t.recentRing)
}

// Contains reports whether id is held (and not expired).
func (t *Tracker) Contains(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	since, held := t.ids[id]
	return held && (t.ttl <= 0 || t.now().Sub(since) < t.ttl)
}

// Len returns the number of held ids.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ids)
}

// Each calls fn for every held id (expired or not), under the lock: fn
// must not call t.
func (t *Tracker) Each(fn func(id string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.ids {
		fn(id)
	}
}
