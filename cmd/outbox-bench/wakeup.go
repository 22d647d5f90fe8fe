package main

import (
	"context"
	"fmt"
	"strconv"
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
	p := newLatencyProbe(count)
	h, err := b.startOutbox(ctx, poller.Config{Interval: wakeupRest, BacklogInterval: wakeupRest}, p.listen)
	if err != nil {
		return result{}, err
	}
	defer h.close()
	r := b.newResult(scenarioWakeup, count)
	if err := p.run(ctx, b, h, wakeupRate, h.publishPlain, &r); err != nil {
		return result{}, fmt.Errorf("wakeup: %w (the poller rests %v: were the notifications lost?)", err, wakeupRest)
	}
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
