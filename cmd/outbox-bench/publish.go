package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/poller"
)

// runPublish measures the publish path: the floor's business transaction
// publishing through the framework, dispatcher running with a no-op
// listener, W writers until N transactions committed. Only the committed
// transaction rate counts; delivery goes on in the background.
func (b *bench) runPublish(ctx context.Context) (result, error) {
	h, err := b.startOutbox(ctx, poller.Config{}, func(context.Context, outbox.Envelope) error { return nil })
	if err != nil {
		return result{}, err
	}
	defer h.close()
	b.resetRSS()
	cpu := startCPU()
	elapsed, err := runPool(ctx, b.opts.workers, b.opts.n, func(ctx context.Context, i int) error {
		return h.publish(ctx, eventType, orderRef("pub", i), orderAmount(i), -1)
	})
	if err != nil {
		return result{}, fmt.Errorf("publish: %w", err)
	}
	r := b.newResult(scenarioPublish, b.opts.n)
	r.CPUusPerEvent = cpu.perEvent(b.opts.n)
	r.rate = rate(b.opts.n, elapsed)
	r.HotDropped = ptr(h.m.hotDropped.Load())
	return r, nil
}

// runEndToEnd measures publish → listener → DONE: from the first publish
// until Store.CountByStatus shows every event DONE. The table is only
// polled once the no-op listener has seen every event, then every 2 ms.
func (b *bench) runEndToEnd(ctx context.Context) (result, error) {
	var seen atomic.Int64
	h, err := b.startOutbox(ctx, poller.Config{}, func(context.Context, outbox.Envelope) error {
		seen.Add(1)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	defer h.close()
	n := b.opts.n
	b.resetRSS()
	cpu := startCPU()
	start := time.Now()
	if _, err := runPool(ctx, b.opts.workers, n, func(ctx context.Context, i int) error {
		return h.publish(ctx, eventType, orderRef("e2e", i), orderAmount(i), -1)
	}); err != nil {
		return result{}, fmt.Errorf("end_to_end: %w", err)
	}
	if _, err := h.waitCount(ctx, &seen, int64(n)); err != nil {
		return result{}, err
	}
	doneAt, err := h.waitDone(ctx, b.opts.warmup+n, 2*time.Millisecond)
	if err != nil {
		return result{}, fmt.Errorf("end_to_end: %w", err)
	}
	r := b.newResult(scenarioEndToEnd, n)
	r.CPUusPerEvent = cpu.perEvent(n)
	r.rate = rate(n, doneAt.Sub(start))
	r.HotDropped = ptr(h.m.hotDropped.Load())
	return r, nil
}
