// Package inflight tracks the events a dispatcher holds.
package inflight

import (
	"math"
	"sync"
	"time"
)

// Tracker tracks the events a dispatcher holds (queued, running or waiting
// for an in-process retry) so the same event is never processed twice at
// once and the poller does not queue it again. It is safe for concurrent use.
//
// Each acquisition of an id has a generation, which the holder passes back
// to every later call. With a TTL an entry may be acquired again while its
// first holder still runs (a listener stuck past the TTL); the first
// holder's generation is then stale: Settle refuses it, and its Release or
// Finish leaves the new holder's entry alone. Settle also closes the race
// between that check and the outcome write: a settling entry is not taken
// again, however old. Without a TTL a held entry is never taken again, so
// the generation of a holder is always current: Settle, Resume and Holds
// cost nothing, and Release and Finish do not check it.
//
// Taking an entry again past the TTL may be undone at once (the new
// holder's queue is full, say): the new holder then releases it without
// having settled. The tracker keeps the entry it replaced until the new
// holder settles or lets go, and such a release puts it back, so the
// first holder, whose run may be the only one, still settles its outcome.
type Tracker struct {
	mu   sync.Mutex
	ttl  time.Duration
	now  func() time.Time
	base time.Time // entries keep their times as offsets from it (see offset)
	ids  map[string]entry
	gens uint64 // the last generation handed out
	// replaced holds, with a TTL, the entry an acquisition past the TTL
	// replaced, by id, while the new holder has neither settled nor let
	// go: Release by the new holder puts it back.
	replaced map[string]entry

	// seq counts the ids let go (released or finished); a claim notes it
	// before it reads rows (Mark).
	seq uint64
	// recent remembers the last ids let go (a ring), so a poller whose
	// claim read a row before its worker let it go cannot queue that stale
	// copy: an id let go (released, or finished: its outcome written) is
	// refused to claims that began before. A finished id is also refused
	// to TryAcquire (the hot path) for recentWindow: a second hand-off of
	// an event already delivered.
	recent     map[string]letGo
	recentRing []slot
	recentNext int
}

// entry is one held id. It is as small as a time.Time alone: the map
// holds one per event in flight.
type entry struct {
	// sec and nsec: acquired (or resumed) at, as an offset from base in
	// whole seconds and nanoseconds (see offset); only with a TTL.
	sec  int64
	gen  uint64
	nsec int32
	// settling: its holder is writing the outcome; the TTL does not let
	// anyone take it meanwhile.
	settling bool
}

// offset returns now as an offset from base, in whole seconds plus
// nanoseconds (within ±1 s). It is the monotonic difference when both
// times have a monotonic reading (time.Now), else the wall one, which
// time.Time.Sub saturates at about 292 years (a test clock still at the
// zero time when the tracker was made, then set): whole seconds hold any
// two times of years 1 to 9999.
func (t *Tracker) offset(now time.Time) (sec int64, nsec int32) {
	if d := now.Sub(t.base); d > math.MinInt64 && d < math.MaxInt64 {
		return int64(d / time.Second), int32(d % time.Second)
	}
	return now.Unix() - t.base.Unix(), int32(now.Nanosecond() - t.base.Nanosecond())
}

// stamp returns a new entry of gen acquired (or resumed) at now.
func (t *Tracker) stamp(gen uint64, now time.Time) entry {
	e := entry{gen: gen}
	if t.ttl > 0 { // else the age is never looked at
		e.sec, e.nsec = t.offset(now)
	}
	return e
}

// maxAgeSec bounds the whole seconds of an age turned into a
// time.Duration: plus the nanoseconds of two fractions, it still fits.
const maxAgeSec = math.MaxInt64/int64(time.Second) - 2

// expired reports whether e may be acquired again at now.
func (t *Tracker) expired(e entry, now time.Time) bool {
	if t.ttl <= 0 || e.settling {
		return false
	}
	sec, nsec := t.offset(now)
	switch age := sec - e.sec; {
	case age > maxAgeSec:
		return true
	case age < -maxAgeSec: // the clock went back centuries
		return false
	default:
		return time.Duration(age)*time.Second+time.Duration(nsec)-time.Duration(e.nsec) >= t.ttl
	}
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

// A tracker remembers at most recentLetGo ids let go; TryAcquire refuses a
// finished one for recentWindow. A claim that began after the finish takes
// it at once: it read the row after the outcome was written, so the row is
// NEW again only because it was put back (an operator replayed the DEAD
// event, say).
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
	t := &Tracker{ttl: ttl, now: now, base: now(), ids: make(map[string]entry),
		recent: make(map[string]letGo, recentLetGo), recentRing: make([]slot, recentLetGo)}
	if ttl > 0 {
		t.replaced = make(map[string]entry)
	}
	return t
}

// Mark returns the tracker's position in its sequence of ids let go. A
// poller takes it before a claim reads rows and passes it to
// TryAcquireClaimed for each row read.
func (t *Tracker) Mark() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// TryAcquire takes id and returns the generation of this acquisition
// (never 0) and true, or reports false if it is held or was finished
// within recentWindow. An entry held for the TTL or longer, and not settling, is taken
// again: its former holder's generation is stale from then on, unless this
// acquisition is released before it settles (see Release).
func (t *Tracker) TryAcquire(id string) (gen uint64, ok bool) {
	return t.tryAcquire(id, 0, false)
}

// TryAcquireClaimed is TryAcquire for a row a claim read after Mark
// returned mark: it refuses an id let go (released or finished) since
// then, whose row the claim may have read while this process still held
// the event, before its outcome or release was written. An id finished
// before mark is taken (the claim read it NEW again: replayed).
func (t *Tracker) TryAcquireClaimed(id string, mark uint64) (gen uint64, ok bool) {
	return t.tryAcquire(id, mark, true)
}

func (t *Tracker) tryAcquire(id string, mark uint64, claimed bool) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if g, ok := t.recent[id]; ok {
		switch {
		case claimed:
			if g.seq > mark {
				return 0, false
			}
		case g.finished && now.Sub(g.at) < recentWindow:
			return 0, false
		}
	}
	if e, held := t.ids[id]; held {
		if !t.expired(e, now) {
			return 0, false
		}
		// Taken again past the TTL: e's holder may be the only one
		// that runs, should this acquisition be undone.
		t.replaced[id] = e
	}
	t.gens++
	t.ids[id] = t.stamp(t.gens, now)
	return t.gens, true
}

// Holds reports whether gen is the current acquisition of id (without a
// TTL: always true, see Tracker).
func (t *Tracker) Holds(id string, gen uint64) bool {
	if t.ttl <= 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.current(id, gen)
	return ok
}

// current returns id's entry if gen is its current acquisition; t.mu is
// held.
func (t *Tracker) current(id string, gen uint64) (entry, bool) {
	e, held := t.ids[id]
	return e, held && e.gen == gen
}

// Settle is called by the holder of gen before it writes the outcome of
// id. It reports false when gen is stale (id was acquired again after the
// TTL, or let go): the caller must write nothing and neither Release nor
// Finish id, and its entry is not put back should the newer acquisition
// be released (see Release). Otherwise the entry is settling until it is
// let go or resumed: the TTL no longer lets anyone take it, so no new
// holder starts between the check and the write, and the entry this
// acquisition replaced, if any, is stale for good. Settling twice is
// allowed. Without a TTL it reports true at no cost.
func (t *Tracker) Settle(id string, gen uint64) bool {
	if t.ttl <= 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.current(id, gen)
	if !ok {
		t.forget(id, gen)
		return false
	}
	delete(t.replaced, id)
	e.settling = true
	t.ids[id] = e
	return true
}

// forget drops the replaced entry of id if gen holds it: its holder gave
// up, so a release of the newer acquisition does not put it back.
func (t *Tracker) forget(id string, gen uint64) {
	if r, ok := t.replaced[id]; ok && r.gen == gen {
		delete(t.replaced, id)
	}
}

// Resume ends the settling of id by the holder of gen, who keeps it (an
// in-process retry): the TTL applies again, counted from now. It reports
// whether gen is current.
func (t *Tracker) Resume(id string, gen uint64) bool {
	if t.ttl <= 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.current(id, gen); !ok {
		return false
	}
	t.ids[id] = t.stamp(gen, t.now())
	return true
}

// Release drops id, held by gen: it may be taken again, except by a claim
// that began before the release (see TryAcquireClaimed). When gen took id
// again past the TTL and has not settled, the entry it replaced is put
// back instead, with its generation and age: its holder, still running,
// may settle. It reports false when gen is stale (only possible with a
// TTL): the entry is left alone, and gen's is not put back later.
func (t *Tracker) Release(id string, gen uint64) bool { return t.letGo(id, gen, false) }

// Finish drops id, held by gen, after an outcome was written: its final
// one (DONE or DEAD), or one that leaves it for later (put off, a RETRY
// the poller delivers when due). It is refused to claims that began
// before (TryAcquireClaimed), whose copy of the row may predate the
// outcome, and to TryAcquire for a few seconds: a second hand-off of the
// event (a late after-commit one, after a claim took it first) would
// deliver it again at once. It reports false, and does nothing, when gen
// is stale (only possible with a TTL).
func (t *Tracker) Finish(id string, gen uint64) bool { return t.letGo(id, gen, true) }

func (t *Tracker) letGo(id string, gen uint64, finished bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ttl > 0 { // else every holder is current (see Tracker)
		if _, ok := t.current(id, gen); !ok {
			t.forget(id, gen)
			return false // a stale holder: the entry is someone else's
		}
		if r, ok := t.replaced[id]; ok {
			delete(t.replaced, id)
			if !finished { // undone: the replaced holder holds id again
				t.ids[id] = r
				return true
			}
		}
	}
	delete(t.ids, id)
	t.seq++
	if old := t.recentRing[t.recentNext]; old.id != "" && t.recent[old.id].seq == old.seq {
		delete(t.recent, old.id) // the id's latest entry is the one leaving the ring
	}
	t.recentRing[t.recentNext] = slot{id: id, seq: t.seq}
	t.recent[id] = letGo{at: t.now(), seq: t.seq, finished: finished}
	t.recentNext = (t.recentNext + 1) % len(t.recentRing)
	return true
}

// Contains reports whether id is held (and not expired; a settling entry
// never is).
func (t *Tracker) Contains(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, held := t.ids[id]
	return held && (t.ttl <= 0 || !t.expired(e, t.now()))
}

// AnyExpired reports whether an id for which match reports true is held
// for the TTL or longer (and not settling): it may be acquired again.
// match is called under the lock, and must not call t. Without a TTL it
// reports false at no cost.
func (t *Tracker) AnyExpired(match func(id string) bool) bool {
	if t.ttl <= 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for id, e := range t.ids {
		if t.expired(e, now) && match(id) {
			return true
		}
	}
	return false
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
