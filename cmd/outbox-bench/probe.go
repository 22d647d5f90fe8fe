package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
)

// latencyProbe measures commit → listener for count events that carry
// their index in the seq header: the publisher stamps each event right
// after its transaction committed, the listener the first time it sees it.
type latencyProbe struct {
	base     time.Time
	commitAt []atomic.Int64
	listenAt []atomic.Int64
	seen     atomic.Int64
}

func newLatencyProbe(count int) *latencyProbe {
	return &latencyProbe{base: time.Now(), commitAt: make([]atomic.Int64, count), listenAt: make([]atomic.Int64, count)}
}

// stamp is the time since the probe began, never 0 (0 means "not yet").
func (p *latencyProbe) stamp() int64 { return int64(time.Since(p.base)) + 1 }

// listen is the listener of the timed events.
func (p *latencyProbe) listen(_ context.Context, env outbox.Envelope) error {
	at := p.stamp()
	if i, ok := seqOf(env, len(p.listenAt)); ok && p.listenAt[i].CompareAndSwap(0, at) {
		p.seen.Add(1)
	}
	return nil
}

// after returns a listener that delivers each event through next and
// stamps it, like listen, once next returned nil: the relay scenarios time
// commit → broker ack.
func (p *latencyProbe) after(next outbox.Listener) outbox.ListenerFunc {
	return func(ctx context.Context, env outbox.Envelope) error {
		if err := next.OnEvent(ctx, env); err != nil {
			return err
		}
		return p.listen(ctx, env)
	}
}

// run publishes the events paced at target events/s (publisher i takes
// the slot i of a fixed schedule and sleeps until it is due), waits until
// the listener saw them all (at most -timeout), and fills r: rate, target
// and the latency percentiles.
func (p *latencyProbe) run(ctx context.Context, b *bench, h *harness, target float64, publish func(ctx context.Context, i int) error, r *result) error {
	count := len(p.listenAt)
	b.resetRSS()
	interval := time.Duration(float64(time.Second) / target)
	start := time.Now()
	elapsed, err := runPool(ctx, b.opts.workers, count, func(ctx context.Context, i int) error {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			if err := sleepCtx(ctx, wait); err != nil {
				return err
			}
		}
		if err := publish(ctx, i); err != nil {
			return err
		}
		p.commitAt[i].Store(p.stamp())
		return nil
	})
	if err != nil {
		return err
	}
	ok, err := h.waitCount(ctx, &p.seen, int64(count))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the listener saw %d of %d events within %v", p.seen.Load(), count, b.opts.timeout)
	}
	r.EventsPerS = round(rate(count, elapsed), 1)
	r.TargetPerS = round(target, 1)
	r.setLatencies(func(i int) int64 { return p.commitAt[i].Load() }, p.listenAt)
	r.HotDropped = ptr(h.m.hotDropped.Load())
	return nil
}
