package dispatcher_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/cfgpath"
)

// faultyObserver panics in Deliver, in the end it returns, or returns a
// nil context, by event type.
type faultyObserver struct{ core.NopObserver }

func (faultyObserver) Deliver(ctx context.Context, d core.Delivery) (context.Context, func(core.DeliveryResult)) {
	switch d.Event.Type() {
	case "PanicStart":
		panic("observer start")
	case "PanicEnd":
		return ctx, func(core.DeliveryResult) { panic("observer end") }
	case "NilCtx":
		return nil, func(core.DeliveryResult) {}
	}
	return ctx, func(core.DeliveryResult) {}
}

// A faulty Observer costs the observation, not the delivery nor the
// process: the events are delivered and DONE, the panics logged (a panic
// of the Observer's killed the worker goroutine and the process; a nil
// context from it crashed the listener call).
func TestObserverFaultsDoNotStopDelivery(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Observer: faultyObserver{}})
	got := make(chan string, 3)
	for _, typ := range []string{"PanicStart", "PanicEnd", "NilCtx"} {
		h.reg.RegisterFunc(typ, func(ctx context.Context, e core.Envelope) error {
			if ctx == nil || ctx.Err() != nil {
				return errors.New("listener got no live context")
			}
			got <- e.Type()
			return nil
		})
	}
	h.start()
	for _, typ := range []string{"PanicStart", "PanicEnd", "NilCtx"} {
		env := h.insert(typ)
		h.mustEnqueueHot(env)
		if typ := recv(t, got, typ+" delivered"); typ == "" {
			t.Fatal("no delivery")
		}
		h.waitStatus(env.ID(), core.StatusDone)
	}
	if !strings.Contains(h.logs.String(), "observer panicked; the delivery goes on unobserved") {
		t.Errorf("the observer's panics were not logged:\n%s", h.logs)
	}
}

// A nil value of the Metrics or Observer interfaces is refused up front
// (it passed, and the first delivery panicked in a worker goroutine); an
// invalid ColdCapacity is reported alone, not also as the RetryCapacity
// it defaults.
func TestConfigRefusesNilValuesAndReportsTheFieldSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  dispatcher.Config
		want []string
	}{
		{"nil metrics", dispatcher.Config{Metrics: (*nilMetrics)(nil)}, []string{"Metrics"}},
		{"nil observer", dispatcher.Config{Observer: (*faultyObserverPtr)(nil)}, []string{"Observer"}},
		{"cold capacity", dispatcher.Config{ColdCapacity: dispatcher.MaxCapacity + 1}, []string{"ColdCapacity"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var fields []string
			for _, ce := range cfgpath.All(err) {
				fields = append(fields, ce.Field)
			}
			if !errors.Is(err, core.ErrInvalidConfig) || strings.Join(fields, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Validate = %v (fields %v), want fields %v", err, fields, tc.want)
			}
		})
	}
}

type nilMetrics struct{ core.NopMetrics }

type faultyObserverPtr struct{ core.NopObserver }
