package dispatcher_test

import (
	"context"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
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
