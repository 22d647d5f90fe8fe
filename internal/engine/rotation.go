package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/outbox-go/outbox/core"
)

// Rotation drives a core.Selector over a changing set of stores and tells a
// poller when to rest: once every store had a poll that did not fill its
// batch with new events, the stores are drained for now. It is not safe
// for concurrent use.
type Rotation struct {
	sel       core.Selector
	last      string
	lastCount int
	drained   map[string]bool // stores whose last poll did not fill a batch with new events
	anyFull   bool            // one of those polls was full of rows held already
	log       *slog.Logger    // told of the first panic of sel; nil: none
	warned    bool            // the panic was logged
}

// NewRotation returns a Rotation using sel (RoundRobin when nil).
func NewRotation(sel core.Selector) *Rotation {
	if sel == nil {
		sel = core.RoundRobin{}
	}
	return &Rotation{sel: sel, drained: make(map[string]bool)}
}

// WithLogger makes r log the first panic of its Selector to log, at WARN,
// and returns r.
func (r *Rotation) WithLogger(log *slog.Logger) *Rotation {
	r.log = log
	return r
}

// Next returns the store to poll next among ids (sorted), or "" when ids
// is empty. A Selector returning an identifier not in ids is overruled by
// round-robin order, so a faulty policy cannot stall the poller; one that
// panics (a user's policy with a bug) gets round-robin order for that
// call instead of killing the loop, and the process with it (see
// WithLogger).
func (r *Rotation) Next(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	id, ok := r.choose(ids)
	if ok {
		if i := sort.SearchStrings(ids, id); i < len(ids) && ids[i] == id {
			return id
		}
	}
	return core.RoundRobin{}.Next(ids, r.last, 0) // the first id after last
}

// choose asks the Selector; ok is false when it panicked.
func (r *Rotation) choose(ids []string) (id string, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			id, ok = "", false
			if r.log != nil && !r.warned {
				r.warned = true
				r.log.LogAttrs(context.Background(), slog.LevelWarn,
					"selector panicked; round-robin order is used for each call that panics (logged once)",
					slog.String("selector", fmt.Sprintf("%T", r.sel)), slog.String("panic", fmt.Sprint(v)))
			}
		}
	}()
	return r.sel.Next(ids, r.last, r.lastCount), true
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
	return r.Settle(id, n, full, ids)
}

// Settle records a poll of store id as Done does, without making it the
// last one the Selector is told of: a poll that ended after the loop
// went on to other stores (see package inbox's slow claims).
func (r *Rotation) Settle(id string, n int, full bool, ids []string) (rest, soon bool) {
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
