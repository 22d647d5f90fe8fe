package dispatcher_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// An event published before Close (its row leased to this node at the
// insert) whose transaction commits after Close released the leases is
// released when its after-commit hook finds the dispatcher closed: any
// node delivers it at once, not after Lease.
func TestEventCommittedAfterCloseIsReleased(t *testing.T) {
	h := newHarness(t, dispatcher.Config{})
	h.start()
	env := h.env("E")
	lease := h.d.HotLease(env) // Publish, in the business transaction
	if err := h.d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.insertEnv(env, lease) // the commit: the row becomes visible now
	if h.d.EnqueueHot(env, lease) {
		t.Fatal("a closed dispatcher took the event")
	}
	if r := h.row(env.ID()); r.LockedBy != "" || r.Status != core.StatusNew {
		t.Errorf("row %v locked by %q until %v; want NEW and released", r.Status, r.LockedBy, r.LockedUntil)
	}
}

// pausedCount counts like testsupport.Metrics, but its first count of a
// hot or cold enqueue after arm waits for resume: a hand-off preempted
// between its look at closed and its send to the queue.
type pausedCount struct {
	*testsupport.Metrics
	armed           atomic.Bool
	paused, resumed chan struct{}
}

func (m *pausedCount) pause() {
	if m.armed.CompareAndSwap(true, false) {
		close(m.paused)
		<-m.resumed
	}
}

func (m *pausedCount) HotEnqueued()  { m.pause(); m.Metrics.HotEnqueued() }
func (m *pausedCount) ColdEnqueued() { m.pause(); m.Metrics.ColdEnqueued() }

// An event handed to the hot or cold queue while Close runs is either
// queued before the workers drain (and delivered) or refused with its
// lease released. The hand-off used to look at closed, then send: Close
// could drain the queues, let the workers exit and release this node's
// leases (keeping the held event's) in between, so the event stayed on a
// queue no worker read, its row leased to this node until Lease ended.
func TestHandOffRacingCloseIsNotStranded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enqueue func(h *harness, env core.Envelope) bool
	}{
		{"hot", (*harness).enqueueHot},
		{"cold", func(h *harness, env core.Envelope) bool { return h.enqueueCold(env, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &pausedCount{paused: make(chan struct{}), resumed: make(chan struct{})}
			h := newHarnessWith(t, dispatcher.Config{}, func(tm *testsupport.Metrics) core.Metrics { m.Metrics = tm; return m })
			h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
			h.start()
			env := h.insert("E")
			m.armed.Store(true)
			took := make(chan bool, 1)
			go func() { took <- tc.enqueue(h, env) }()
			recv(t, m.paused, "the hand-off to count the event")
			closed := make(chan error, 1)
			go func() { closed <- h.d.Close(context.Background()) }()
			// Close is under way: done (the hand-off's send comes after
			// the drain) or waiting for the hand-off to send.
			testsupport.WaitFor(t, waitTimeout, "Close to drain or to wait for the hand-off",
				func() bool { return len(closed) > 0 || dispatcher.IntakeClosing(h.d) })
			close(m.resumed)
			taken := recv(t, took, "the hand-off")
			if err := recv(t, closed, "Close"); err != nil {
				t.Fatalf("Close = %v", err)
			}
			r := h.row(env.ID())
			if taken && r.Status != core.StatusDone {
				t.Errorf("event taken by the queue, row %v after Close; want DONE", r.Status)
			}
			if r.Status != core.StatusDone && r.LockedBy != "" {
				t.Errorf("row %v still leased to %q after Close; want delivered or released", r.Status, r.LockedBy)
			}
			if n := h.d.Held(); n != 0 {
				t.Errorf("dispatcher holds %d events after Close, want 0", n)
			}
		})
	}
}
