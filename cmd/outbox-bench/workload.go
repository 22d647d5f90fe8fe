package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The events every scenario publishes (or, for the floor, stores by hand).
const (
	eventType     = "OrderPlaced"
	warmupType    = "BenchWarmup"
	aggregateType = "Order"
	// seqHeader carries the event's index in the latency and overload
	// scenarios, so the listener can tick it off without the tool keeping
	// the envelopes.
	seqHeader = "bench-seq"
)

// orderRef returns the business reference of transaction i of a scenario.
func orderRef(prefix string, i int) string {
	return prefix + "-" + strconv.Itoa(i)
}

// orderAmount is the business row's amount for transaction i.
func orderAmount(i int) int64 { return int64(1000 + i%9000) }

// orderPayload returns the small JSON document of transaction i, the same
// in every scenario: {"ref":"…","amount_cents":…,"currency":"EUR"}.
func orderPayload(ref string, amount int64) []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"ref":`...)
	b = strconv.AppendQuote(b, ref)
	b = append(b, `,"amount_cents":`...)
	b = strconv.AppendInt(b, amount, 10)
	b = append(b, `,"currency":"EUR"}`...)
	return b
}

// runPool runs do(ctx, i) for i in [0, n) on workers goroutines, each
// taking the next index as soon as it is free, and returns how long that
// took. The first error stops every goroutine and is returned.
func runPool(parent context.Context, workers, n int, do func(ctx context.Context, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	start := time.Now()
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil {
		firstErr = parent.Err() // interrupted
	}
	return elapsed, firstErr
}

// rate returns n events over d in events per second.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
