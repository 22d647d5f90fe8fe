package dispatcher_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// outcomes records the outcome the Observer gets for each event.
type outcomes struct {
	core.NopObserver
	mu   sync.Mutex
	got  map[string]core.DeliveryResult
	done int
}

func (o *outcomes) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	return ctx, func(r core.DeliveryResult) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, dup := o.got[d.Event.ID()]; dup {
			panic("end called twice for " + d.Event.ID())
		}
		o.got[d.Event.ID()] = r
	}
}

func (o *outcomes) DoneWritten(_ string, n int, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.done += n
	}
}

func (o *outcomes) result(id string) (core.DeliveryResult, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.got[id]
	return r, ok
}

// Every way an attempt ends reaches the Observer once, with its outcome:
// done, dead on the last attempt, put off for an unavailable downstream,
// unhandled without a listener (which ran none: Listeners is zero); DONE
// writes are reported with their size.
func TestObserverOutcomes(t *testing.T) {
	obs := &outcomes{got: map[string]core.DeliveryResult{}}
	h := newHarness(t, dispatcher.Config{Workers: 2, MaxAttempts: 1, Observer: obs})
	h.reg.RegisterFunc("Ok", func(context.Context, core.Envelope) error { return nil })
	h.reg.RegisterFunc("Fail", func(context.Context, core.Envelope) error { return errors.New("boom") })
	h.reg.RegisterFunc("Down", func(context.Context, core.Envelope) error { return core.Unavailable(errBrokerDown, time.Hour) })
	h.start()
	want := map[string]core.Outcome{}
	for typ, o := range map[string]core.Outcome{"Ok": core.OutcomeDone, "Fail": core.OutcomeDead,
		"Down": core.OutcomePutOff, "Nobody": core.OutcomeUnhandled} {
		e := h.insert(typ)
		want[e.ID()] = o
		h.mustEnqueueHot(e)
	}
	for id, o := range want {
		h.wait("the outcome of "+id, func() bool { _, ok := obs.result(id); return ok })
		r, _ := obs.result(id)
		if r.Outcome != o {
			t.Errorf("%s: outcome %v, want %v", id, r.Outcome, o)
		}
		if (o == core.OutcomeDone) != (r.Err == nil) {
			t.Errorf("%s: outcome %v with error %v", id, r.Outcome, r.Err)
		}
		if o == core.OutcomeUnhandled && r.Listeners != 0 {
			t.Errorf("%s: unhandled, no listener ran, but Listeners = %v, want 0", id, r.Listeners)
		}
	}
	h.wait("the DONE writes observed", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.done == 2 // Ok, and Nobody (marked DONE: UnhandledDone)
	})
}

// deliveries records every core.Delivery the Observer is given.
type deliveries struct {
	core.NopObserver
	mu  sync.Mutex
	got []core.Delivery
}

func (o *deliveries) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, d)
	return ctx, func(core.DeliveryResult) {}
}

func (o *deliveries) all() []core.Delivery {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]core.Delivery(nil), o.got...)
}

// A first delivery is not redelivered; an in-process retry is, and so is
// a claimed event whose row tells it (an attempt charged before).
func TestObserverRedelivered(t *testing.T) {
	obs := &deliveries{}
	h := newHarness(t, dispatcher.Config{Workers: 1, Observer: obs, Retry: fixedDelay(time.Millisecond)})
	var calls atomic.Int32
	h.reg.RegisterFunc("Flaky", failFirst(&calls))
	h.reg.RegisterFunc("Ok", func(context.Context, core.Envelope) error { return nil })
	h.start()
	h.mustEnqueueHot(h.insert("Flaky"))
	h.wait("the retry delivered", func() bool { return len(obs.all()) == 2 })
	claimed := h.insert("Ok")
	h.markRetry(claimed.ID(), "failed before")
	h.mustEnqueueCold(claimed, 1)
	h.wait("the claimed event delivered", func() bool { return len(obs.all()) == 3 })
	for i, want := range []struct {
		path        core.Path
		attempt     int
		redelivered bool
	}{{core.PathHot, 1, false}, {core.PathRetry, 2, true}, {core.PathCold, 2, true}} {
		d := obs.all()[i]
		if d.Path != want.path || d.Attempt != want.attempt || d.Redelivered != want.redelivered {
			t.Errorf("delivery %d: path %v attempt %d redelivered %v, want %v %d %v", i, d.Path, d.Attempt, d.Redelivered,
				want.path, want.attempt, want.redelivered)
		}
	}
}
