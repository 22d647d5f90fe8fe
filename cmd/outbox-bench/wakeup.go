package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/poller"
)

// Pacing of the wakeup scenario.
const (
	wakeupMaxEvents = 500
	wakeupRate      = 200.0 // events/s
	wakeupRest      = time.Hour
)

// runWakeup measures commit returned → listener invoked for events that
// only the database's commit notification can deliver in time: each is
// published with PublishTx on a plain *sql.Tx (no after-commit hand-off,
// so the row is unowned and no hot path sees it) while the poller rests
// for an hour between polls. Publishers are paced at wakeupRate.
func (b *bench) runWakeup(ctx context.Context) (result, error) {
	count := max(1, min(b.opts.n/10, wakeupMaxEvents))
	base := time.Now()
	stamp := func() int64 { return int64(time.Since(base)) + 1 } // 0 means "not yet"
	commitAt := make([]atomic.Int64, count)
	listenAt := make([]atomic.Int64, count)
	var seen atomic.Int64
	h, err := b.startOutbox(ctx, poller.Config{Interval: wakeupRest, BacklogInterval: wakeupRest},
		func(_ context.Context, env outbox.Envelope) error {
			at := stamp()
			if i, ok := seqOf(env, count); ok && listenAt[i].CompareAndSwap(0, at) {
				seen.Add(1)
			}
			return nil
		})
	if err != nil {
		return result{}, err
	}
	defer h.close()
	interval := time.Duration(float64(time.Second) / wakeupRate)
	start := time.Now()
	elapsed, err := runPool(ctx, b.opts.workers, count, func(ctx context.Context, i int) error {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			if err := sleepCtx(ctx, wait); err != nil {
				return err
			}
		}
		if err := h.publishPlain(ctx, i); err != nil {
			return err
		}
		commitAt[i].Store(stamp())
		return nil
	})
	if err != nil {
		return result{}, fmt.Errorf("wakeup: %w", err)
	}
	ok, err := h.waitCount(ctx, &seen, int64(count))
	if err != nil {
		return result{}, err
	}
	if !ok {
		return result{}, fmt.Errorf("wakeup: the listener saw %d of %d events within %v (the poller rests %v: were the notifications lost?)",
			seen.Load(), count, b.opts.timeout, wakeupRest)
	}
	r := b.newResult(scenarioWakeup, count)
	r.EventsPerS = round(rate(count, elapsed), 1)
	r.TargetPerS = round(wakeupRate, 1)
	r.setLatencies(func(i int) int64 { return commitAt[i].Load() }, listenAt)
	r.HotDropped = ptr(h.m.hotDropped.Load())
	b.wakeupP99 = r.P99us
	return r, nil
}

// publishPlain runs one business transaction on a plain *sql.Tx, not the
// outbox's: the business INSERT and PublishTx of an event carrying seq,
// then Commit.
func (h *harness) publishPlain(ctx context.Context, seq int) error {
	tx, err := h.f.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	ref := orderRef("wake", seq)
	if _, err := tx.ExecContext(ctx, h.f.insertOrder, ref, orderAmount(seq)); err != nil {
		return fmt.Errorf("insert order: %w", err)
	}
	env, err := outbox.NewEvent(eventType).AggregateType(aggregateType).AggregateID(ref).
		PayloadJSON(orderPayload(ref, orderAmount(seq))).Header(seqHeader, strconv.Itoa(seq)).Build()
	if err != nil {
		return err
	}
	if _, err := h.ob.PublishTx(ctx, tx, env); err != nil {
		return err
	}
	return tx.Commit()
}
