package core

import "sort"

// Selector chooses which of several stores (one per database or tenant) a
// poller reads next. Implementations must be safe
// for use by one goroutine at a time; a poller calls Next, polls the store
// it returned, and passes the outcome to the next call.
//
// RoundRobin and DrainFirst are provided; any other policy (weights,
// priorities, backlog-driven) can implement the interface.
type Selector interface {
	// Next returns the identifier of the store to poll next. ids is the
	// current set of store identifiers, sorted and non-empty; it may
	// change between calls as stores are added and removed. last is the
	// store polled last ("" before the first poll, and it may no longer be
	// in ids) and lastCount how many events that poll yielded. The result
	// must be one of ids.
	Next(ids []string, last string, lastCount int) string
}

// RoundRobin takes one batch from each store in turn, in identifier order:
// after store i comes store i+1, whatever store i yielded.
type RoundRobin struct{}

// Next returns the first identifier after last, wrapping around.
func (RoundRobin) Next(ids []string, last string, _ int) string { return after(ids, last) }

// DrainFirst stays on a store while it yields events and moves to the
// next one, in identifier order, only when a poll comes back empty.
type DrainFirst struct{}

// Next returns last while it yielded events and is still present, else
// the first identifier after it.
func (DrainFirst) Next(ids []string, last string, lastCount int) string {
	if lastCount > 0 {
		if i := sort.SearchStrings(ids, last); i < len(ids) && ids[i] == last {
			return last
		}
	}
	return after(ids, last)
}

// after returns the first of the sorted ids greater than last, or the
// first one when none is (also when last is "").
func after(ids []string, last string) string {
	i := sort.SearchStrings(ids, last)
	if i < len(ids) && ids[i] == last {
		i++
	}
	if i >= len(ids) {
		i = 0
	}
	return ids[i]
}

// Rotation drives a [Selector] over a changing set of stores and tells a
// poller when to rest: once every store had a poll that did not fill its
// batch with new events, the stores are drained for now. It is not safe
// for concurrent use.
type Rotation struct {
	sel       Selector
	last      string
	lastCount int
	drained   map[string]bool // stores whose last poll did not fill a batch with new events
	anyFull   bool            // one of those polls was full of rows held already
}

// NewRotation returns a Rotation using sel (RoundRobin when nil).
func NewRotation(sel Selector) *Rotation {
	if sel == nil {
		sel = RoundRobin{}
	}
	return &Rotation{sel: sel, drained: make(map[string]bool)}
}

// Next returns the store to poll next among ids (sorted), or "" when ids
// is empty. A Selector returning an identifier not in ids is overruled by
// round-robin order, so a faulty policy cannot stall the poller.
func (r *Rotation) Next(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	id := r.sel.Next(ids, r.last, r.lastCount)
	if i := sort.SearchStrings(ids, id); i < len(ids) && ids[i] == id {
		return id
	}
	return after(ids, r.last)
}

// Done records that a poll of store id yielded n new events and whether
// it claimed as many rows as it asked for (full); ids are the current
// stores. It reports rest when the poller should pause: since the last
// poll that filled its batch with new events, every store had a poll that
// did not. soon is then true when one of those polls was full anyway (of
// rows this node holds already, so more rows may be waiting behind them):
// rest briefly rather than a whole interval.
func (r *Rotation) Done(id string, n int, full bool, ids []string) (rest, soon bool) {
	r.last, r.lastCount = id, n
	if full && n > 0 {
		clear(r.drained)
		r.anyFull = false
		return false, false
	}
	r.drained[id] = true
	r.anyFull = r.anyFull || full
	for _, s := range ids {
		if !r.drained[s] {
			return false, false
		}
	}
	soon = r.anyFull
	clear(r.drained)
	r.anyFull = false
	return true, soon
}
