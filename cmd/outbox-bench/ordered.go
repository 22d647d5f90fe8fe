package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/poller"
)

// Sizes of the ordered scenarios that do not run N events.
const (
	// oneKeyMaxEvents caps ordered_one_key: every event waits for its
	// predecessor's DONE write, so one key moves far slower than many.
	oneKeyMaxEvents = 2000
)

// orderKey returns the ordering key number k of a scenario.
func orderKey(prefix string, k int) string {
	return "bench-" + prefix + "-" + strconv.Itoa(k)
}

// runOrderedEndToEnd is end_to_end with ordered events: transaction i
// publishes its event on key i mod K (-ordered-keys), so consecutive
// events of a key are K transactions apart. From the first publish until
// every row is DONE.
func (b *bench) runOrderedEndToEnd(ctx context.Context) (result, error) {
	keys := b.opts.orderedKeys
	r, h, err := b.endToEnd(ctx, scenarioOrderedE2E, b.opts.n, func(i int) string { return orderKey("e2e", i%keys) })
	if err != nil {
		return r, err
	}
	r.OrderKeys = ptr(keys)
	r.ColdEnqueued = ptr(h.m.coldEnqueued.Load())
	return r, nil
}

// runOrderedOneKey is end_to_end with every event on one key (at most
// oneKeyMaxEvents, N/10): delivery is sequential, each event waits for
// the DONE write of the one before.
func (b *bench) runOrderedOneKey(ctx context.Context) (result, error) {
	n := max(1, min(b.opts.n/10, oneKeyMaxEvents))
	key := orderKey("one", 0)
	r, h, err := b.endToEnd(ctx, scenarioOrderedOneKey, n, func(int) string { return key })
	if err != nil {
		return r, err
	}
	r.OrderKeys = ptr(1)
	r.ColdEnqueued = ptr(h.m.coldEnqueued.Load())
	r.EventsPerS = round(r.rate, 1)
	b.oneKeyRate = r.rate
	return r, nil
}

// endToEnd runs publish → listener → DONE for n events, event i ordered
// on keyOf(i) (unordered when it returns ""), and returns the line with
// its unrounded rate and the closed harness (for its counters).
func (b *bench) endToEnd(ctx context.Context, scenario string, n int, keyOf func(i int) string) (result, *harness, error) {
	return b.endToEndVia(ctx, scenario, n, keyOf, outboxSetup{})
}

// endToEndVia is endToEnd on an outbox set up by s: its listener
// registered with RegisterAll (s.all) delivers the events instead of the
// no-op listener when set (an event counts as seen once it returned nil),
// and s.tune changes the dispatcher.
func (b *bench) endToEndVia(ctx context.Context, scenario string, n int, keyOf func(i int) string, s outboxSetup) (result, *harness, error) {
	var seen atomic.Int64
	if s.all == nil {
		s.listen = func(context.Context, outbox.Envelope) error {
			seen.Add(1)
			return nil
		}
	} else {
		deliver := s.all
		s.all = outbox.ListenerFunc(func(ctx context.Context, env outbox.Envelope) error {
			if err := deliver.OnEvent(ctx, env); err != nil {
				return err
			}
			if env.Type() == eventType {
				seen.Add(1)
			}
			return nil
		})
	}
	h, err := b.start(ctx, s)
	if err != nil {
		return result{}, nil, err
	}
	defer h.close()
	b.resetRSS()
	cpu := startCPU()
	start := time.Now()
	published, err := runPool(ctx, b.opts.workers, n, func(ctx context.Context, i int) error {
		return h.publishKeyed(ctx, eventType, orderRef("e2e", i), orderAmount(i), -1, keyOf(i))
	})
	if err != nil {
		return result{}, nil, fmt.Errorf("%s: %w", scenario, err)
	}
	behind := int64(n) - seen.Load() // events not yet delivered when the last commit returned
	if _, err := h.waitCount(ctx, &seen, int64(n)); err != nil {
		return result{}, nil, err
	}
	doneAt, err := h.waitDone(ctx, b.opts.warmup+n, 2*time.Millisecond)
	if err != nil {
		return result{}, nil, fmt.Errorf("%s: %w", scenario, err)
	}
	r := b.newResult(scenario, n)
	r.CPUusPerEvent = cpu.perEvent(n)
	r.rate = rate(n, doneAt.Sub(start))
	r.HotDropped = ptr(h.m.hotDropped.Load())
	if s.all != nil {
		// Whether delivery kept up with the publishers, or they waited
		// for it: the publishers' own rate and the delivery backlog when
		// they finished.
		r.Notes = append(r.Notes, fmt.Sprintf("published/s=%.0f", rate(n, published)), fmt.Sprintf("undelivered_at_last_commit=%d", behind))
	}
	return r, h, nil
}

// runOrderedLatency is latency with ordered events whose key has nothing
// pending: event i is the second event of its own key, the first one
// (untimed, published and DONE before the timed part) already finished, so
// the publish takes the key's next position, finds the predecessor DONE
// and the event goes to a worker right after commit. Paced at half the
// ordered_end_to_end rate, N/4 events (at most ~5 s).
func (b *bench) runOrderedLatency(ctx context.Context) (result, error) {
	target := b.orderedRate / 2
	if target <= 0 {
		return result{}, errors.New("no ordered_end_to_end rate to pace by")
	}
	count := max(1, min(b.opts.n/4, int(target*latencyMaxDuration.Seconds())))
	p := newLatencyProbe(count)
	h, err := b.startOutbox(ctx, poller.Config{}, p.listen)
	if err != nil {
		return result{}, err
	}
	defer h.close()
	// The first event of every key, delivered by the warm-up listener.
	if _, err := runPool(ctx, b.opts.workers, count, func(ctx context.Context, i int) error {
		return h.publishKeyed(ctx, warmupType, orderRef("olat-first", i), orderAmount(i), -1, orderKey("lat", i))
	}); err != nil {
		return result{}, fmt.Errorf("first events: %w", err)
	}
	if _, err := h.waitDone(ctx, b.opts.warmup+count, 5*time.Millisecond); err != nil {
		return result{}, fmt.Errorf("first events: %w", err)
	}
	h.m.hotDropped.Store(0)
	h.m.coldEnqueued.Store(0)
	r := b.newResult(scenarioOrderedLatency, count)
	if err := p.run(ctx, b, h, target, func(ctx context.Context, i int) error {
		return h.publishKeyed(ctx, eventType, orderRef("olat", i), orderAmount(i), i, orderKey("lat", i))
	}, &r); err != nil {
		return result{}, err
	}
	r.ColdEnqueued = ptr(h.m.coldEnqueued.Load())
	b.orderedP99 = r.P99us
	return r, nil
}
