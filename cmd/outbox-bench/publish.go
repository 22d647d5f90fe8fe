package main

import (
	"context"
	"fmt"

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
	r, _, err := b.endToEnd(ctx, scenarioEndToEnd, b.opts.n, func(int) string { return "" })
	return r, err
}
