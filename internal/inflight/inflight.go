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

	// seq counts the ids let go (released or finished); a claim notes it
	// before it reads rows (Mark).
	seq uint64
	// recent remembers the last ids let go (a ring), so a poller whose
	// claim read a row before its worker let it go cannot queue that stale
	// copy right after: a finished id is refused for recentWindow, a
	// released one to claims that began before its release.
	recent     map[string]letGo
	recentRing []slot
	recentNext int
}

// letGo is how an id left the tracker.
type letGo struct {
	at       time.Time
	seq      uint64
	finished bool
}

// slot is one place of the recent ring.
type slot struct {
	id  string
	seq uint64
}

// A tracker remembers at most recentLetGo ids let go, a finished one for at
// most recentWindow: long enough to cover a claim racing with the outcome
// write, short enough that an event replayed by an operator is taken again.
const (
	recentLetGo  = 8192
	recentWindow = 5 * time.Second
)

// New returns a tracker. With ttl > 0 an entry older than ttl may be
// acquired again (recovery from a stuck worker).
func New(ttl time.Duration, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{ttl: ttl, now: now, ids: make(map[string]time.Time),
		recent: make(map[string]letGo, recentLetGo), recentRing: make([]slot, recentLetGo)}
}

// Mark returns the tracker's position in its sequence of ids let go. A
// poller takes it before a claim reads rows and passes it to
// TryAcquireClaimed for each row read.
func (t *Tracker) Mark() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// TryAcquire takes id and reports true, or reports false if it is held
// or was finished recently.
func (t *Tracker) TryAcquire(id string) bool {
	return t.tryAcquire(id, 0, false)
}

// TryAcquireClaimed is TryAcquire for a row a claim read after Mark
// returned mark: it also refuses an id let go (released or finished) since
// then, whose row the claim may have read while this process still held
// the event, before its outcome or release was written.
func (t *Tracker) TryAcquireClaimed(id string, mark uint64) bool {
	return t.tryAcquire(id, mark, true)
}

func (t *Tracker) tryAcquire(id string, mark uint64, claimed bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if g, ok := t.recent[id]; ok {
		switch {
		case claimed && g.seq > mark:
			return false
		case g.finished && now.Sub(g.at) < recentWindow:
			return false
		}
	}
	if since, held := t.ids[id]; held && (t.ttl <= 0 || now.Sub(since) < t.ttl) {
		return false
	}
	t.ids[id] = now
	return true
}

// Release drops id: it may be taken again, except by a claim that began
// before the release (see TryAcquireClaimed).
func (t *Tracker) Release(id string) { t.letGo(id, false) }

// Finish drops id after its final outcome (DONE or DEAD) was written and
// remembers it for a few seconds, so a stale copy from a claim that raced
// with the outcome write is not processed again.
func (t *Tracker) Finish(id string) { t.letGo(id, true) }

func (t *Tracker) letGo(id string, finished bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ids, id)
	t.seq++
	if old := t.recentRing[t.recentNext]; old.id != "" && t.recent[old.id].seq == old.seq {
		delete(t.recent, old.id) // the id's latest entry is the one leaving the ring
	}
	t.recentRing[t.recentNext] = slot{id: id, seq: t.seq}
	t.recent[id] = letGo{at: t.now(), seq: t.seq, finished: finished}
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
