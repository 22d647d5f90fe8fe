package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/poller"
)

// latencyMaxDuration caps the latency scenario's publishing time.
const latencyMaxDuration = 5 * time.Second

// runLatency measures commit returned → listener invoked. Publishers are
// paced to half the measured end_to_end rate (each takes the next slot of
// a fixed schedule and sleeps until it is due) for N/4 events, or fewer so
// that publishing lasts about 5 s at most. Each event carries its index in
// a header; the publisher stamps the time right after InTx returns, the
// listener the time it is invoked (the first time, should it see the
// event twice). The after-commit hook runs inside InTx, so a worker can
// reach the listener before InTx returns: such a latency is counted as 0.
func (b *bench) runLatency(ctx context.Context) (result, error) {
	target := b.e2eRate / 2
	if target <= 0 {
		return result{}, errors.New("latency: no end_to_end rate to pace by")
	}
	count := max(1, min(b.opts.n/4, int(target*latencyMaxDuration.Seconds())))
	p := newLatencyProbe(count)
	h, err := b.startOutbox(ctx, poller.Config{}, p.listen)
	if err != nil {
		return result{}, err
	}
	defer h.close()
	r := b.newResult(scenarioLatency, count)
	if err := p.run(ctx, b, h, target, func(ctx context.Context, i int) error {
		return h.publish(ctx, eventType, orderRef("lat", i), orderAmount(i), i)
	}, &r); err != nil {
		return result{}, fmt.Errorf("latency: %w", err)
	}
	b.p99 = r.P99us
	return r, nil
}

// setLatencies fills the line's percentiles with listenAt[i] - commitAt(i)
// of every event; a latency below zero (the listener ran before the
// publisher took its time stamp) counts as 0, and how many did is
// ZeroClamped.
func (r *result) setLatencies(commitAt func(i int) int64, listenAt []atomic.Int64) {
	lat := make([]time.Duration, len(listenAt))
	clamped := 0
	for i := range lat {
		d := time.Duration(listenAt[i].Load() - commitAt(i))
		if d <= 0 {
			d = 0
			clamped++
		}
		lat[i] = d
	}
	slices.Sort(lat)
	r.P50us = micros(percentile(lat, 50))
	r.P90us = micros(percentile(lat, 90))
	r.P99us = micros(percentile(lat, 99))
	r.MaxUs = micros(lat[len(lat)-1])
	r.ZeroClamped = ptr(clamped)
}

// seqOf returns the index carried in the event's seq header, if it is
// present and below n.
func seqOf(env outbox.Envelope, n int) (int, bool) {
	v, ok := env.Header(seqHeader)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= n {
		return 0, false
	}
	return i, true
}

// percentile returns the nearest-rank p-th percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank-1, 0), len(sorted)-1)]
}

// micros returns d in microseconds, rounded to 0.1.
func micros(d time.Duration) *float64 {
	return round(float64(d)/float64(time.Microsecond), 1)
}
