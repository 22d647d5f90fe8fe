package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/parts"
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
// slow listener (time.Sleep per event, see overloadSlow: W workers consume
// at most half the measured publish rate) falls behind: the hot queue fills, the rest
// waits in the table for the poller (default queue capacities and poll
// intervals; Poller.SkipRecent is -overload-skip-recent). It reports the
// peak RSS of the process during the scenario, the time from the first
// publish until every row is DONE, and the events lost: indexes the
// listener never saw, or rows not DONE, whichever is more (must be 0).
func (b *bench) runOverload(ctx context.Context) (result, error) {
	n := b.opts.overloadN
	seen := newSeenSet(n)
	slow := b.overloadSlow()
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
	if b.opts.payload > 0 {
		h.pad = padPayload(b.opts.payload)
	}
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
	counts, err := h.ob.CountByStatus(ctx)
	if err != nil {
		return result{}, fmt.Errorf("overload: %w", err)
	}
	notDone := n - (counts[core.StatusDone] - b.opts.warmup)
	lost := max(seen.missing(n), notDone, 0)

	if lost > 0 {
		h.explainStuck(ctx, counts)
	}
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
	if b.opts.payload > 0 {
		r.PayloadBytes = ptr(b.opts.payload)
	}
	if held := b.maxHeldBytes(); held >= 0 {
		r.MaxHeldMiB = round(float64(held)/(1<<20), 1)
	}
	r.RSSTargetMiB = ptr(b.rssTargetMiB())
	b.lost = r.Lost
	return r, nil
}

// padPayload returns a JSON document of exactly n bytes (n >= 2): a string
// of 'x'.
func padPayload(n int) []byte {
	p := bytes.Repeat([]byte{'x'}, n)
	p[0], p[n-1] = '"', '"'
	return p
}

// maxHeldBytes returns the dispatcher's MaxHeldBytes in this run (-1: no
// limit).
func (b *bench) maxHeldBytes() int64 {
	if b.opts.maxHeld == 0 {
		return dispatcher.DefaultMaxHeldBytes
	}
	return b.opts.maxHeld
}

// rssTargetMiB is the overload scenario's peak-RSS target: targetPeakRSSMiB
// with the small default payload; with -payload, targetRSSBudgetFactor ×
// the payload budget (MaxHeldBytes) + targetRSSOverheadMiB. Without a
// budget there is no target (0).
func (b *bench) rssTargetMiB() int {
	if b.opts.payload == 0 {
		return targetPeakRSSMiB
	}
	held := b.maxHeldBytes()
	if held < 0 {
		return 0
	}
	return int(math.Ceil(targetRSSBudgetFactor*float64(held)/(1<<20))) + targetRSSOverheadMiB
}

// overloadSlow returns the overload listener's time per event: -overload-slow,
// or by default W/(publish rate/2), so that the W workers consume at most
// half as fast as the writers publish (2 ms without a publish rate).
func (b *bench) overloadSlow() time.Duration {
	if b.opts.slow > 0 {
		return b.opts.slow
	}
	if b.publishRate <= 0 {
		return defaultSlowListen
	}
	d := time.Duration(float64(b.opts.workers) / (b.publishRate / 2) * float64(time.Second))
	return d.Round(10 * time.Microsecond)
}

// explainStuck prints, for events that never got DONE, what the table and
// the dispatcher say about a few of them: the material for a bug report.
func (h *harness) explainStuck(ctx context.Context, counts map[core.Status]int) {
	h.b.warn("overload: events not delivered; rows by status: NEW %d, RETRY %d, DONE %d, DEAD %d",
		counts[core.StatusNew], counts[core.StatusRetry], counts[core.StatusDone], counts[core.StatusDead])
	recs, err := parts.Outbox(h.ob).Store.PollPending(ctx, time.Now(), 0, 5)
	if err != nil {
		h.b.warn("overload: reading the stuck rows: %v", err)
		return
	}
	st := h.ob.DispatcherStats()
	h.b.warn("overload: in memory now: hot %d, cold %d, retry timers %d, payload bytes %d", st.Hot, st.Cold, st.Retries, st.HeldBytes)
	for _, rec := range recs {
		h.b.warn("overload: stuck %s: status %d, attempts %d, locked_by %q until %s, created %s",
			rec.ID, rec.Status, rec.Attempts, rec.LockedBy, rec.LockedUntil.Format(time.RFC3339Nano),
			rec.CreatedAt.Format(time.RFC3339Nano))
	}
}
