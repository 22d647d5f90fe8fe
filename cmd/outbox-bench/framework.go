package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/txctx"
)

// closeTimeout bounds Outbox.Close at the end of a scenario: queued events
// left after it stay in the database, which is dropped anyway.
const closeTimeout = 10 * time.Second

// counters is a core.Metrics that counts the signals the report shows.
type counters struct {
	core.NopMetrics
	hotEnqueued, hotDropped, coldEnqueued, leaseLost atomic.Int64
}

// HotEnqueued counts events handed to the hot queue after commit.
func (c *counters) HotEnqueued() { c.hotEnqueued.Add(1) }

// HotDropped counts events left to the poller because the hot queue was full.
func (c *counters) HotDropped() { c.hotDropped.Add(1) }

// ColdEnqueued counts events the poller queued.
func (c *counters) ColdEnqueued() { c.coldEnqueued.Add(1) }

// LeaseLost counts status writes fenced off (never expected here).
func (c *counters) LeaseLost(n int) { c.leaseLost.Add(int64(n)) }

// harness is a running outbox on a fresh database, for one scenario.
type harness struct {
	b  *bench
	f  *freshDB
	ob *outbox.Outbox
	m  *counters
	// pad, when set, is the JSON payload of every event of eventType
	// (the overload scenario's -payload).
	pad []byte
	// shared is set when the database outlives the harness (history).
	shared bool
	// pending, when set, replaces the count by status of waitDone: the
	// history scenario's table is too big to count on every check.
	pending func(ctx context.Context) (int, error)
}

// outboxSetup is how one scenario's outbox differs from the default one.
type outboxSetup struct {
	// poller configures the poller; Interval and BacklogInterval default
	// to -poll-interval and -backlog-interval.
	poller poller.Config
	// listen, when set, is registered for the benchmark's event type.
	listen outbox.ListenerFunc
	// all, when set, is registered with RegisterAll: it sees every event,
	// the warm-up ones included (the relay scenarios).
	all outbox.Listener
	// tune, when set, changes the dispatcher configuration.
	tune func(*dispatcher.Config)
	// observer, when set, is Config.Observer (observed_end_to_end).
	observer core.Observer
	// metrics, when set, returns Config.Metrics given the counters the
	// report reads, which it must keep feeding.
	metrics func(*counters) core.Metrics
	// db, when set, is the database to use instead of a fresh one; it is
	// left open and kept when the harness closes (history).
	db *freshDB
	// pending, when set, is harness.pending.
	pending func(ctx context.Context) (int, error)
	// beforeStart, when set, runs after the outbox is built (schema
	// applied) and before it starts, and there is no warm-up: the
	// recovery scenarios seed a crashed node's backlog there and time
	// from its return.
	beforeStart func(ctx context.Context, f *freshDB) error
}

// startOutbox opens a fresh database, builds the outbox with the default
// configuration (W dispatcher workers, the tool's logger, pcfg for the
// poller), registers listen for the benchmark's event type and a no-op
// listener for the warm-up type, starts it, and runs the warm-up: a few
// hundred untimed transactions, all DONE before it returns.
func (b *bench) startOutbox(ctx context.Context, pcfg poller.Config, listen outbox.ListenerFunc) (*harness, error) {
	return b.start(ctx, outboxSetup{poller: pcfg, listen: listen})
}

// start is startOutbox with the scenario's setup.
func (b *bench) start(ctx context.Context, s outboxSetup) (*harness, error) {
	f, err := s.db, error(nil)
	if f == nil {
		if f, err = openFresh(ctx, b.opts); err != nil {
			return nil, err
		}
	}
	return b.startOn(ctx, f, s)
}

// startOn is start on the database f, which the harness closes (and
// removes) with the outbox unless it is s.db; the multinode scenario's
// nodes run it on the one database they share.
func (b *bench) startOn(ctx context.Context, f *freshDB, s outboxSetup) (*harness, error) {
	closeDB := func() {
		if s.db == nil {
			b.closeDB(f)
		}
	}
	m := &counters{}
	var metrics core.Metrics = m
	if s.metrics != nil {
		metrics = s.metrics(m)
	}
	pcfg := s.poller
	if pcfg.Interval == 0 {
		pcfg.Interval = b.opts.pollEvery
	}
	if pcfg.BacklogInterval == 0 {
		pcfg.BacklogInterval = b.opts.backlog
	}
	dcfg := dispatcher.Config{Workers: b.opts.workers,
		DoneFlushWindow: b.opts.doneWindow, DoneBatchSize: b.opts.doneBatch, MaxHeldBytes: b.opts.maxHeld}
	if s.tune != nil {
		s.tune(&dcfg)
	}
	ob, err := outbox.New(ctx, f.db, outbox.Config{
		Dispatcher: dcfg,
		Poller:     pcfg,
		Logger:     b.log,
		Metrics:    metrics,
		Observer:   s.observer,
	})
	if err != nil {
		closeDB()
		return nil, fmt.Errorf("outbox.New: %w", err)
	}
	if s.listen != nil {
		ob.RegisterFunc(eventType, s.listen)
	}
	ob.RegisterFunc(warmupType, func(context.Context, outbox.Envelope) error { return nil })
	if s.all != nil {
		ob.RegisterAll(s.all)
	}
	if s.beforeStart != nil {
		if err := s.beforeStart(ctx, f); err != nil {
			closeDB()
			return nil, err
		}
	}
	if err := ob.Start(ctx); err != nil {
		closeDB()
		return nil, fmt.Errorf("outbox start: %w", err)
	}
	h := &harness{b: b, f: f, ob: ob, m: m, shared: s.db != nil, pending: s.pending}
	if s.beforeStart != nil {
		return h, nil
	}
	if err := h.warmup(ctx); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// warmup publishes the warm-up events and waits until they are DONE, so
// the timed part starts with warm connections and idle workers.
func (h *harness) warmup(ctx context.Context) error {
	n := h.b.opts.warmup
	if n == 0 {
		return nil
	}
	if _, err := runPool(ctx, h.b.opts.workers, n, func(ctx context.Context, i int) error {
		return h.publish(ctx, warmupType, orderRef("warm", i), orderAmount(i), -1)
	}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := h.waitDone(ctx, n, 5*time.Millisecond); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	h.m.hotDropped.Store(0)
	h.m.coldEnqueued.Store(0)
	return nil
}

// publish runs one business transaction through the framework: InTx, the
// business INSERT on the carried transaction, and Publish of an event of
// type typ with the order's JSON payload (and the seq header when seq >= 0).
func (h *harness) publish(ctx context.Context, typ, ref string, amount int64, seq int) error {
	return h.publishKeyed(ctx, typ, ref, amount, seq, "")
}

// publishKeyed is publish; the event is delivered in order with the other
// events of orderKey unless it is "".
func (h *harness) publishKeyed(ctx context.Context, typ, ref string, amount int64, seq int, orderKey string) error {
	return h.ob.InTx(ctx, func(ctx context.Context) error {
		tx, ok := txctx.From(ctx)
		if !ok {
			return errors.New("no transaction in the context")
		}
		if _, err := tx.ExecContext(ctx, h.f.insertOrder, ref, amount); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		eb := outbox.NewEvent(typ).AggregateType(aggregateType).AggregateID(ref).
			PayloadJSON(orderPayload(ref, amount))
		if h.pad != nil && typ == eventType {
			eb = eb.PayloadJSON(h.pad) // Build copies it: one payload per event
		}
		if seq >= 0 {
			eb = eb.Header(seqHeader, strconv.Itoa(seq))
		}
		if orderKey != "" {
			eb = eb.OrderKey(orderKey)
		}
		env, err := eb.Build()
		if err != nil {
			return err
		}
		_, err = h.ob.Publish(ctx, env)
		return err
	})
}

// waitDone polls Store.CountByStatus every `every` until at least want
// rows are DONE and returns when it saw them. A DEAD row, the -timeout or
// an interrupt ends the wait with an error.
func (h *harness) waitDone(ctx context.Context, want int, every time.Duration) (time.Time, error) {
	if h.pending != nil {
		return h.waitSettled(ctx, every)
	}
	deadline := time.Now().Add(h.b.opts.timeout)
	for {
		counts, err := h.ob.CountByStatus(ctx)
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		switch {
		case counts[core.StatusDone] >= want:
			return now, nil
		case counts[core.StatusDead] > 0:
			return time.Time{}, fmt.Errorf("%d events are DEAD", counts[core.StatusDead])
		case now.After(deadline):
			return time.Time{}, fmt.Errorf("timed out after %v: %d of %d events DONE (%d NEW, %d RETRY)",
				h.b.opts.timeout, counts[core.StatusDone], want, counts[core.StatusNew], counts[core.StatusRetry])
		}
		if err := sleepCtx(ctx, every); err != nil {
			return time.Time{}, err
		}
	}
}

// waitCount waits until c reaches want, checking every millisecond, for at
// most the -timeout. It reports whether c got there.
func (h *harness) waitCount(ctx context.Context, c *atomic.Int64, want int64) (bool, error) {
	deadline := time.Now().Add(h.b.opts.timeout)
	for c.Load() < want {
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return false, err
		}
	}
	return true, nil
}

// close stops the outbox (draining its queues for at most closeTimeout)
// and removes the database.
func (h *harness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := h.ob.Close(ctx); err != nil {
		h.b.warn("closing the outbox: %v", err)
	}
	if !h.shared {
		h.b.closeDB(h.f)
	}
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
