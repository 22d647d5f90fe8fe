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
