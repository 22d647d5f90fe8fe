package dispatcher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// An event this node's poller claimed between its commit and the
// after-commit hand-off, whose claimed copy was put off (or retried
// later, through the database) before the hand-off came, is not delivered
// again by the stale hot copy: the hand-off is refused, as for an event
// already finished. (Before, during a broker outage, a just-committed
// event was handed to the relay twice, 6-9 ms apart, the second put-off
// fenced off: "the event is DONE already or another node owns it now".)
func TestHotCopyOfAnEventPutOffMeanwhileIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
	}{
		{"put off", core.Unavailable(errors.New("broker down"), time.Hour)},
		{"retry through the database", errors.New("boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, dispatcher.Config{Workers: 1, RetryCapacity: -1, Retry: fixedDelay(time.Hour)})
			var mu sync.Mutex
			calls := map[string]int{}
			h.reg.RegisterFunc("Flaky", func(_ context.Context, env core.Envelope) error {
				mu.Lock()
				calls[env.ID()]++
				mu.Unlock()
				return tc.fail
			})
			done := make(chan string, 1)
			h.reg.RegisterFunc("Ok", func(_ context.Context, env core.Envelope) error { done <- env.ID(); return nil })
			h.start()
			e := h.insert("Flaky")     // inserted leased to this node, as its publish does
			h.mustEnqueueCold(e, 0)    // the poller's copy, claimed before the hand-off
			h.waitReleased(e.ID())     // delivered, and let go (put off, or RETRY left to the poller)
			h.enqueueHot(e)            // the after-commit hand-off, late
			sentinel := h.insert("Ok") // one worker: delivered after whatever the hand-off queued
			h.mustEnqueueHot(sentinel)
			recv(t, done, "the next event")
			mu.Lock()
			defer mu.Unlock()
			if n := calls[e.ID()]; n != 1 {
				t.Errorf("the event was delivered %d times, want 1 (the stale hot copy refused)", n)
			}
		})
	}
}
