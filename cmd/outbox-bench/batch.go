package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/txctx"
)

// batchSize is the number of events each transaction of the batch
// scenario publishes.
const batchSize = 10

// runBatch measures PublishAll: W writers run N/10 business
// transactions, each inserting one business row and publishing 10 events
// with one PublishAll (one multi-row INSERT), dispatcher running with a
// no-op listener as in publish. The rate is committed events per second,
// comparable with publish's (one event per transaction): batch_speedup =
// batch rate / publish rate. Then it waits until every event is DONE and
// notes that rate too (first publish → all DONE).
func (b *bench) runBatch(ctx context.Context) (result, error) {
	h, err := b.startOutbox(ctx, poller.Config{}, func(context.Context, outbox.Envelope) error { return nil })
	if err != nil {
		return result{}, err
	}
	defer h.close()
	txs := max(1, b.opts.n/batchSize)
	n := txs * batchSize
	b.resetRSS()
	cpu := startCPU()
	start := time.Now()
	elapsed, err := runPool(ctx, b.opts.workers, txs, func(ctx context.Context, i int) error {
		return h.publishBatch(ctx, i)
	})
	if err != nil {
		return result{}, fmt.Errorf("batch: %w", err)
	}
	r := b.newResult(scenarioBatch, n)
	r.CPUusPerEvent = cpu.perEvent(n)
	r.rate = rate(n, elapsed)
	doneAt, err := h.waitDone(ctx, b.opts.warmup+n, 2*time.Millisecond)
	if err != nil {
		return result{}, fmt.Errorf("batch: %w", err)
	}
	r.HotDropped = ptr(h.m.hotDropped.Load())
	r.Notes = append(r.Notes, fmt.Sprintf("events_per_tx=%d", batchSize),
		fmt.Sprintf("done_events_per_s=%.0f", rate(n, doneAt.Sub(start))))
	return r, nil
}

// publishBatch runs business transaction i of the batch scenario: the
// business row of order i, then its batchSize events (order i's lines)
// with one PublishAll.
func (h *harness) publishBatch(ctx context.Context, i int) error {
	ref := orderRef("batch", i)
	amount := orderAmount(i)
	return h.ob.InTx(ctx, func(ctx context.Context) error {
		tx, ok := txctx.From(ctx)
		if !ok {
			return errors.New("no transaction in the context")
		}
		if _, err := tx.ExecContext(ctx, h.f.insertOrder, ref, amount); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		envs := make([]outbox.Envelope, batchSize)
		for k := range envs {
			env, err := outbox.NewEvent(eventType).AggregateType(aggregateType).AggregateID(ref).
				PayloadJSON(orderPayload(ref, amount+int64(k))).Build()
			if err != nil {
				return err
			}
			envs[k] = env
		}
		_, err := h.ob.PublishAll(ctx, envs...)
		return err
	})
}
