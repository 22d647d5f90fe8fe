package main

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/poller"
)

// seenSet records which event indexes a listener saw, one bit each, so
// the tool's own memory stays at N/8 bytes (25 KB for 200,000 events).
type seenSet struct {
	words []atomic.Uint64
	dups  atomic.Int64
	count atomic.Int64
}

// newSeenSet returns an empty set for indexes [0, n).
func newSeenSet(n int) *seenSet { return &seenSet{words: make([]atomic.Uint64, (n+63)/64)} }

// mark records index i, counting a duplicate when it was already set.
func (s *seenSet) mark(i int) {
	bit := uint64(1) << (i % 64)
	if s.words[i/64].Or(bit)&bit != 0 {
		s.dups.Add(1)
		return
	}
	s.count.Add(1)
}

// missing returns how many indexes of [0, n) were never marked.
func (s *seenSet) missing(n int) int {
	set := 0
	for i := range s.words {
		set += bits.OnesCount64(s.words[i].Load())
	}
	return n - set
}

// runOverload publishes -overload-n events as fast as W writers can while a
// slow listener (time.Sleep(-overload-slow) per event, so W workers consume
// at most W/slow events/s) falls behind: the hot queue fills, the rest
// waits in the table for the poller (default queue capacities and poll
// intervals; Poller.SkipRecent is -overload-skip-recent). It reports the
// peak RSS of the process during the scenario, the time from the first
// publish until every row is DONE, and the events lost: indexes the
// listener never saw, or rows not DONE, whichever is more (must be 0).
func (b *bench) runOverload(ctx context.Context) (result, error) {
	n := b.opts.overloadN
	seen := newSeenSet(n)
	slow := b.opts.slow
	skip := b.opts.skipRecent
	if skip == 0 {
		skip = -1 // the poller's "none"; 0 would mean its 1 s default
	}
	h, err := b.startOutbox(ctx, poller.Config{SkipRecent: skip}, func(_ context.Context, env outbox.Envelope) error {
		if i, ok := seqOf(env, n); ok {
			seen.mark(i)
		}
		if slow > 0 {
			time.Sleep(slow)
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	defer h.close()
	b.resetRSS()
	start := time.Now()
	pubElapsed, err := runPool(ctx, b.opts.workers, n, func(ctx context.Context, i int) error {
		return h.publish(ctx, eventType, orderRef("ovl", i), orderAmount(i), i)
	})
	if err != nil {
		return result{}, fmt.Errorf("overload: %w", err)
	}
	all, err := h.waitCount(ctx, &seen.count, int64(n))
	if err != nil {
		return result{}, err
	}
	var doneAt time.Time
	if all {
		if doneAt, err = h.waitDone(ctx, b.opts.warmup+n, 5*time.Millisecond); err != nil {
			return result{}, fmt.Errorf("overload: %w", err)
		}
	}
	counts, err := h.ob.Store.CountByStatus(ctx)
	if err != nil {
		return result{}, fmt.Errorf("overload: %w", err)
	}
	notDone := n - (counts[core.StatusDone] - b.opts.warmup)
	lost := max(seen.missing(n), notDone, 0)

	r := b.newResult(scenarioOverload, n)
	if all && lost == 0 {
		r.EventsPerS = round(rate(n, doneAt.Sub(start)), 1)
		r.TimeToDoneS = round(doneAt.Sub(start).Seconds(), 2)
	}
	r.PublishS = round(pubElapsed.Seconds(), 2)
	r.PublishPerS = round(rate(n, pubElapsed), 1)
	r.ListenerSlowUs = round(float64(slow)/float64(time.Microsecond), 1)
	r.Lost = ptr(lost)
	r.Duplicates = ptr(int(seen.dups.Load()))
	r.HotDropped = ptr(h.m.hotDropped.Load())
	r.ColdEnqueued = ptr(h.m.coldEnqueued.Load())
	b.lost = r.Lost
	return r, nil
}
