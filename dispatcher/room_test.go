package dispatcher_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// A room notice armed on a full cold queue runs once the workers drained
// it to half its capacity, not before, and once only; armed on a queue
// at most half full it runs at once.
func TestRoomNoticeWhenColdQueueDrainsToHalf(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, ColdCapacity: 4})
	took := make(chan struct{}, 8)
	step := make(chan struct{}, 8) // one listener call allowed per token
	h.reg.RegisterFunc("S", func(ctx context.Context, _ core.Envelope) error {
		took <- struct{}{}
		select {
		case <-step:
		case <-ctx.Done():
		}
		return nil
	})
	for range 4 { // not started: the queue fills
		h.mustEnqueueCold(h.insert("S"), 0)
	}
	var fired atomic.Int32
	notice := make(chan struct{}, 4)
	h.d.NotifyRoom(func() { fired.Add(1); notice <- struct{}{} })
	if fired.Load() != 0 {
		t.Fatal("notice ran on a full queue")
	}
	h.start()
	recv(t, took, "the first event taken") // 3 queued: more than half
	if fired.Load() != 0 {
		t.Fatal("notice ran with 3 of 4 queued")
	}
	step <- struct{}{}
	recv(t, took, "the second event taken") // 2 queued: half
	recv(t, notice, "the room notice")
	step <- struct{}{}
	recv(t, took, "the third event taken")
	if n := fired.Load(); n != 1 {
		t.Errorf("notice ran %d times, want once", n)
	}
	// The queue holds 1 of 4: a notice armed now runs at once.
	ran := false
	h.d.NotifyRoom(func() { ran = true })
	if !ran {
		t.Error("notice armed on a queue at most half full did not run at once")
	}
	step <- struct{}{}
	step <- struct{}{}
}
