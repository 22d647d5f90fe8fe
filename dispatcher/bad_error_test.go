package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// faultyErr is a listener's error type whose methods read a field, so a
// typed nil pointer of it panics when logged or unwrapped.
type faultyErr struct{ cause error }

func (e *faultyErr) Error() string { return "faulty: " + e.cause.Error() }
func (e *faultyErr) Unwrap() error { return e.cause }

// A listener that returns a typed nil pointer as its error (a nil
// *core.UnavailableError, or one of its own types whose methods panic on
// nil) fails the attempt like any error: the event goes RETRY, and the
// process does not crash on the dispatcher's inspection of the error.
func TestTypedNilListenerErrorsFailTheAttempt(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, RetryCapacity: -1, Retry: fixedDelay(time.Hour)})
	h.reg.RegisterFunc("Unavailable", func(context.Context, core.Envelope) error {
		var ue *core.UnavailableError
		return ue
	})
	h.reg.RegisterFunc("Faulty", func(context.Context, core.Envelope) error {
		var fe *faultyErr
		return fe
	})
	h.start()
	for _, typ := range []string{"Unavailable", "Faulty"} {
		e := h.insert(typ)
		h.mustEnqueueHot(e)
		h.waitStatus(e.ID(), core.StatusRetry)
		if r := h.row(e.ID()); r.Attempts != 1 {
			t.Errorf("%s: attempts %d, want 1", typ, r.Attempts)
		}
	}
	var ue *core.UnavailableError
	if got := ue.Error(); got != core.ErrUnavailable.Error() || !errors.Is(ue, core.ErrUnavailable) {
		t.Errorf("a nil *UnavailableError says %q (Is ErrUnavailable: %v)", got, errors.Is(ue, core.ErrUnavailable))
	}
}
