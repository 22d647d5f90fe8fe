package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// Close called from a listener with its context (or one derived from it)
// returns ErrCloseInListener at once instead of waiting for the listener
// that calls it, forever; the dispatcher keeps running. Another
// dispatcher's listener may close it.
func TestCloseFromListenerReturnsAtOnce(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2})
	type result struct {
		err     error
		took    time.Duration
		in      bool
		derived bool
	}
	res := make(chan result, 1)
	h.reg.RegisterFunc("CloseMe", func(ctx context.Context, _ core.Envelope) error {
		derived, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		start := time.Now()
		err := h.d.Close(derived)
		res <- result{err: err, took: time.Since(start), in: h.d.InListener(ctx), derived: h.d.InListener(derived)}
		return nil
	})
	h.start()
	e := h.insert("CloseMe")
	h.mustEnqueueHot(e)
	r := recv(t, res, "Close called by the listener to return")
	if !errors.Is(r.err, dispatcher.ErrCloseInListener) {
		t.Fatalf("Close from the listener = %v, want ErrCloseInListener", r.err)
	}
	if r.took > time.Second {
		t.Errorf("Close from the listener took %v, want at once", r.took)
	}
	if !r.in || !r.derived {
		t.Errorf("InListener(listener ctx) = %v, InListener(derived) = %v; want true, true", r.in, r.derived)
	}
	h.waitStatus(e.ID(), core.StatusDone)

	// Still running: a second event is delivered.
	c := &calls{}
	h.reg.RegisterFunc("After", func(_ context.Context, env core.Envelope) error { c.add(env.ID()); return nil })
	after := h.insert("After")
	h.mustEnqueueHot(after)
	h.waitStatus(after.ID(), core.StatusDone)
	if h.d.InListener(context.Background()) || h.d.InListener(t.Context()) {
		t.Error("InListener true for a context of no listener")
	}

	// A listener of another dispatcher closes this one.
	other := newHarness(t, dispatcher.Config{Workers: 1})
	closed := make(chan error, 1)
	other.reg.RegisterFunc("CloseOther", func(ctx context.Context, _ core.Envelope) error {
		closed <- h.d.Close(ctx)
		return nil
	})
	other.start()
	other.mustEnqueueHot(other.insert("CloseOther"))
	if err := recv(t, closed, "Close of another dispatcher"); err != nil {
		t.Fatalf("Close from another dispatcher's listener = %v, want nil", err)
	}
	if err := h.d.Start(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Start after Close = %v, want core.ErrClosed", err)
	}
}
