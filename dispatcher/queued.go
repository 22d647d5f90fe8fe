package dispatcher

import "sync"

// queuedSet holds the ids of a store's events waiting in the hot or cold
// queue: held, but taken by no worker yet. When RemoveStore gives up
// waiting, no worker will run them (the store's work context is
// cancelled), so their leases are handed back with the rest, unlike those
// of the events whose listeners still run (see heldIDs).
type queuedSet struct {
	mu  sync.Mutex
	ids map[string]int // an id's copies queued (a stale copy beside a new one)
}

func (q *queuedSet) add(id string) {
	q.mu.Lock()
	if q.ids == nil {
		q.ids = make(map[string]int)
	}
	q.ids[id]++
	q.mu.Unlock()
}

func (q *queuedSet) remove(id string) {
	q.mu.Lock()
	if n := q.ids[id]; n > 1 {
		q.ids[id] = n - 1
	} else {
		delete(q.ids, id)
	}
	q.mu.Unlock()
}

// snapshot returns a copy of the set.
func (q *queuedSet) snapshot() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.ids))
	for id, n := range q.ids {
		out[id] = n
	}
	return out
}
