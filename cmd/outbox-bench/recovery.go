package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
)

// Settings of the recovery scenarios.
const (
	// recoveryHotShare is the hot publishers' pace during a drain, as a
	// share of the end_to_end rate: a steady trickle of new business
	// whose latency shows whether the backlog starves the hot path.
	recoveryHotShare = 0.1
	// recoveryHotSpan is the share of the drain's expected duration (N /
	// end_to_end rate) the hot publishers span, so that they publish
	// while the backlog drains.
	recoveryHotSpan = 0.8
	// recoveryKeyPrefix starts the ordering keys of ordered_recovery.
	recoveryKeyPrefix = "bench-rcv-"
)

// runRecovery drains the backlog of a crashed node: -recovery-n NEW rows
// leased by a node that is gone (leases expired), seeded in bulk before
// the outbox starts; the no-op listener counts them. From Start until
// every seeded row is DONE; drain_ratio = this rate / end_to_end rate.
// Meanwhile publishers paced at recoveryHotShare × the end_to_end rate
// publish new events through the hot path: the line's percentiles are
// their commit → listener latencies during the drain.
func (b *bench) runRecovery(ctx context.Context) (result, error) {
	r, err := b.drain(ctx, scenarioRecovery, b.opts.recoveryN, 0)
	if err == nil {
		b.drainRate, b.drainHotP99 = r.rate, r.P99us
	}
	return r, err
}

// runOrderedRecovery is recovery with an ordered backlog: row i on key i
// mod -recovery-keys, in position order (N/10 rows, at most as many as
// recovery). Every key's events must reach the listener in order.
func (b *bench) runOrderedRecovery(ctx context.Context) (result, error) {
	n := max(1, b.opts.recoveryN/10)
	r, err := b.drain(ctx, scenarioOrderedRecovery, n, min(b.opts.recoveryKeys, n))
	if err == nil {
		b.orderedDrainRate = r.rate
	}
	return r, err
}

// drain runs one recovery scenario over n seeded rows, ordered over keys
// keys (unordered with 0).
func (b *bench) drain(ctx context.Context, scenario string, n, keys int) (result, error) {
	if b.e2eRate <= 0 {
		return result{}, errors.New("no end_to_end rate to pace the hot publishers by")
	}
	seen := newSeenSet(n)
	var order *orderCheck
	if keys > 0 {
		order = newOrderCheck(keys)
	}
	hotRate := recoveryHotShare * b.e2eRate
	hotCount := max(1, int(hotRate*recoveryHotSpan*float64(n)/b.e2eRate))
	probe := newLatencyProbe(hotCount)
	var (
		start time.Time
		cpu   cpuMeter
	)
	h, err := b.start(ctx, outboxSetup{
		listen: probe.listen,
		all: outbox.ListenerFunc(func(_ context.Context, env outbox.Envelope) error {
			if env.Type() != recoveredType {
				return nil
			}
			if i, ok := seqOf(env, n); ok {
				seen.mark(i)
				if order != nil {
					order.see(i, keys)
				}
			}
			return nil
		}),
		beforeStart: func(ctx context.Context, f *freshDB) error {
			if err := seedBacklog(ctx, f, n, keys); err != nil {
				return err
			}
			b.resetRSS()
			start, cpu = time.Now(), startCPU()
			return nil
		},
	})
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", scenario, err)
	}
	defer h.close()
	r := b.newResult(scenario, n)
	// The hot publishers run during the drain; their line fields are the
	// probe's, the rate is then the drain's.
	if err := probe.run(ctx, b, h, hotRate, func(ctx context.Context, i int) error {
		return h.publish(ctx, eventType, orderRef("rcv-hot", i), orderAmount(i), i)
	}, &r); err != nil {
		return result{}, fmt.Errorf("%s: hot publishers: %w", scenario, err)
	}
	hotPerS := r.EventsPerS
	all, err := h.waitCount(ctx, &seen.count, int64(n))
	if err != nil {
		return result{}, err
	}
	if !all {
		return result{}, fmt.Errorf("%s: the listener saw %d of %d seeded events within %v", scenario, seen.count.Load(), n, b.opts.timeout)
	}
	doneAt, err := h.waitDone(ctx, n+hotCount, time.Millisecond)
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", scenario, err)
	}
	elapsed := doneAt.Sub(start)
	r.CPUusPerEvent = cpu.perEvent(n + hotCount)
	r.rate = rate(n, elapsed)
	r.EventsPerS = round(r.rate, 1)
	r.TimeToDoneS = round(elapsed.Seconds(), 2)
	r.Duplicates = ptr(int(seen.dups.Load()))
	r.ColdEnqueued = ptr(h.m.coldEnqueued.Load())
	r.Notes = append(r.Notes, fmt.Sprintf("hot_events=%d", hotCount), fmt.Sprintf("hot/s=%v", *hotPerS))
	if keys > 0 {
		r.OrderKeys = ptr(keys)
		if bad := order.violations.Load(); bad > 0 {
			return result{}, fmt.Errorf("%s: %d events reached the listener before an earlier event of their key", scenario, bad)
		}
	}
	if counts, err := h.ob.CountByStatus(ctx); err == nil && counts[core.StatusDead] > 0 {
		return result{}, fmt.Errorf("%s: %d events are DEAD", scenario, counts[core.StatusDead])
	}
	return r, nil
}

// orderCheck verifies the order of an ordered backlog as the listener
// sees it: row i is position i/keys+1 of key i mod keys, and no position
// may arrive before the one before it (a redelivered earlier position is
// at-least-once, not a violation).
type orderCheck struct {
	mu         sync.Mutex
	last       []int // the highest position seen per key
	violations atomic.Int64
}

func newOrderCheck(keys int) *orderCheck { return &orderCheck{last: make([]int, keys)} }

// see records that row i (of a backlog over keys keys) reached the listener.
func (c *orderCheck) see(i, keys int) {
	k, pos := i%keys, i/keys+1
	c.mu.Lock()
	defer c.mu.Unlock()
	if pos > c.last[k]+1 {
		c.violations.Add(1)
	}
	c.last[k] = max(c.last[k], pos)
}

// drainSummary adds the recovery scenarios' figures to the summary and
// checks their targets: drain_ratio and recovery's peak RSS (overload's
// target: the backlog must not be read into memory).
func (b *bench) drainSummary(s *summary, miss func(string)) {
	if b.e2eRate <= 0 {
		return
	}
	if b.drainRate > 0 {
		s.DrainRatio = round(b.drainRate/b.e2eRate, 3)
		if *s.DrainRatio < targetDrainRatio {
			miss(fmt.Sprintf("drain_ratio >= %.2f", targetDrainRatio))
		}
		s.DrainHotP99us = b.drainHotP99
	}
	if s.DrainPeakRSSMB = b.drainRSS; s.DrainPeakRSSMB != nil && *s.DrainPeakRSSMB > targetPeakRSSMiB {
		miss(fmt.Sprintf("drain_peak_rss_mb <= %d", targetPeakRSSMiB))
	}
	if b.orderedDrainRate > 0 {
		s.OrderedDrainRatio = round(b.orderedDrainRate/b.e2eRate, 3)
	}
}
