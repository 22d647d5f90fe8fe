package poller

import (
	"slices"

	"github.com/outbox-go/outbox/internal/handoff"
)

// Wake makes a started poller poll at once instead of waiting for the
// rest of its interval, for example because another node announced a
// committed event (package outbox does this on PostgreSQL, through
// LISTEN/NOTIFY). It never blocks: calls made before the woken poll
// starts are merged into it. A Wake before Start makes the first poll
// happen at once. With several stores ([NewMulti]) the woken poll reads
// the store the Selector picks next.
//
// A woken poll ignores Config.SkipRecent. SkipRecent keeps the poller
// from racing this node's hot path for rows it just published; the rows
// a wake-up is about were published unowned (a plain *sql.Tx, another
// node without a hot path, or an ordered event behind a pending one of
// its key) and no hot path will deliver them, so waiting would only delay
// them. Otherwise a woken poll claims as any poll does (see PollOnce):
// unowned rows, rows whose lease expired, and this node's own rows (its
// hot queue's drops) unless the dispatcher can tell it holds every row
// leased here; a row the dispatcher holds is not delivered twice.
func (p *Poller) Wake() {
	p.wakeMu.Lock()
	p.wokenAll = true
	p.wakeMu.Unlock()
	p.run.Wake()
}

func init() {
	handoff.WakeStore = func(p any, id string) { p.(*Poller).wakeStore(id) }
	handoff.FreshStart = func(p any) { p.(*Poller).freshStart.Store(true) }
}

// wakeStore is Wake for one store of a poller of several: the next poll
// reads store id, whatever the Selector would pick, and ignores
// SkipRecent (package tenant calls it when that store's database announces
// a commit). Stores woken before the poll starts are polled first, in the
// order of their wake-ups, one poll each; repeated wake-ups of a store
// waiting for its poll are merged. It never blocks.
func (p *Poller) wakeStore(id string) {
	p.wakeMu.Lock()
	if !slices.Contains(p.wokenStores, id) {
		p.wokenStores = append(p.wokenStores, id)
	}
	p.wakeMu.Unlock()
	p.run.Wake()
}

// takeWake returns the store the next poll of the loop must read because
// of a wake-up, and consumes that wake-up: the first woken store still
// polled, else, after a Wake, the store the Selector picks. t is nil
// when nothing was woken. The caller holds cycleMu.
func (p *Poller) takeWake() (id string, t *target, ids []string, store bool) {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	for len(p.wokenStores) > 0 {
		id = p.wokenStores[0]
		p.wokenStores = p.wokenStores[1:]
		if t, ok := p.targets.Get(id); ok {
			return id, t, p.targets.IDs(), true
		}
	}
	if p.wokenAll {
		p.wokenAll = false
		id, t, ids = p.targets.Next(p.rotation)
		return id, t, ids, false
	}
	return "", nil, nil, false
}

// rewake puts back the wake-up a poll consumed without reaching the
// database (the cold queue was full), so the poll after the backlog pause
// reads that store, still ignoring SkipRecent.
func (p *Poller) rewake(id string, store bool) {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	switch {
	case !store:
		p.wokenAll = true
	case !slices.Contains(p.wokenStores, id):
		p.wokenStores = slices.Insert(p.wokenStores, 0, id)
	}
}

// wakePending reports whether a wake-up waits for its poll.
func (p *Poller) wakePending() bool {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	return p.wokenAll || len(p.wokenStores) > 0
}

// forgetWake drops the wake-up, and the positions waiting for a claim, of
// a store that is no longer polled.
func (p *Poller) forgetWake(id string) {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	p.wokenStores = slices.DeleteFunc(p.wokenStores, func(s string) bool { return s == id })
	p.afterStores = slices.DeleteFunc(p.afterStores, func(s string) bool { return s == id })
}
