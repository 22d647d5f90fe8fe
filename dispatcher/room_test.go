package dispatcher_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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

// A worker whose cold event waits for room in the DONE batcher (the
// database writes DONE slower than a backlog drains) delivers the hot
// events that come meanwhile: a committed event does not wait behind the
// backlog's DONE writes. Every event ends DONE.
func TestHotEventServedWhileColdDoneWaits(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, DoneBatchSize: 1, DoneFlushWindow: time.Millisecond})
	writes := newGate(t)
	flushing := make(chan struct{}, 16)
	h.st.Fail = func(op, _ string) error {
		if op == "done" {
			flushing <- struct{}{}
			<-writes.ch
		}
		return nil
	}
	h.reg.RegisterFunc("C", func(context.Context, core.Envelope) error { return nil })
	hot := make(chan struct{}, 1)
	h.reg.RegisterFunc("H", func(context.Context, core.Envelope) error { hot <- struct{}{}; return nil })
	ev := h.insert("H") // the store's writes block below: insert it now
	var cold []core.Envelope
	for range 3 { // one in the stuck write, one waiting in its store's lane, one waiting for room
		env := h.insert("C")
		cold = append(cold, env)
		h.mustEnqueueCold(env, 0)
	}
	h.start()
	recv(t, flushing, "the first DONE write")
	h.wait("the cold queue taken", func() bool { _, c := h.d.QueueDepths(); return c == 0 })
	h.mustEnqueueHot(ev)
	recv(t, hot, "the hot event's listener while the DONE writes are stuck")
	writes.open()
	for _, env := range append(cold, ev) {
		h.waitStatus(env.ID(), core.StatusDone)
	}
}

// A room notice armed while MaxHeldBytes is used up waits until an event
// leaves memory, though the cold queue is empty: run at once, it woke the
// poller into a cycle that found no room again and armed it again, in a
// busy loop for as long as the budget stayed used up.
func TestRoomNoticeWaitsForTheByteBudget(t *testing.T) {
	h, g, started := blockingHarness(t, 1000)
	h.start()
	big := h.insert("Block", sized(1500)) // larger than the budget: taken alone
	h.mustEnqueueHot(big)
	recv(t, started, "the listener to start")
	if room := h.d.ColdRoom(); room != 0 {
		t.Fatalf("ColdRoom = %d with the budget used up, want 0", room)
	}
	notice := make(chan struct{}, 1)
	h.d.NotifyRoom(func() { notice <- struct{}{} })
	select {
	case <-notice:
		t.Fatal("notice ran with the byte budget used up")
	default:
	}
	g.open()
	recv(t, notice, "the room notice once the event left memory")
	if h.d.ColdRoom() == 0 {
		t.Fatal("the notice ran while ColdRoom is 0")
	}
}
