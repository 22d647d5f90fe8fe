package poller_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/poller"
)

// ptrSelector is a selector whose nil pointer panics when called.
type ptrSelector struct{ calls int }

func (s *ptrSelector) Next(ids []string, last string, n int) string {
	s.calls++
	return core.RoundRobin{}.Next(ids, last, n)
}

// panicSelector panics on every call.
type panicSelector struct{}

func (panicSelector) Next([]string, string, int) string { panic("a bug in the selector") }

// A nil value of a selector type is refused by Config's validation (the
// poller called it at its first poll over two stores and the process
// died), as tenant.New reports it under "Poller.Selector".
func TestConfigRefusesANilSelectorValue(t *testing.T) {
	cfg := poller.Config{Selector: (*ptrSelector)(nil)}
	if err := cfg.Validate(); !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(cfgpath.Fields(err), []string{"Selector"}) {
		t.Errorf("Validate = %v, want one problem of Selector", err)
	}
	if _, err := poller.NewMulti(cfg); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("NewMulti = %v, want core.ErrInvalidConfig", err)
	}
	if err := (poller.Config{Selector: &ptrSelector{}}).Validate(); err != nil {
		t.Errorf("Validate of a real selector = %v", err)
	}
	// So are nil values of Metrics and Observer (the first poll panicked
	// in the poller's goroutine).
	cfg = poller.Config{Metrics: (*nilPtrMetrics)(nil), Observer: (*nilPtrObserver)(nil)}
	if err := cfg.Validate(); !slices.Equal(cfgpath.Fields(err), []string{"Metrics", "Observer"}) {
		t.Errorf("Validate = %v, want problems of Metrics and Observer", err)
	}
}

type nilPtrMetrics struct{ core.NopMetrics }

type nilPtrObserver struct{ core.NopObserver }

// A selector that panics does not kill the poller: each poll falls back
// to round-robin order, and the stores are all drained.
func TestPollerSurvivesAPanickingSelector(t *testing.T) {
	f := newMultiFixture(t, panicSelector{})
	got := f.polls(t, 4)
	if want := []string{"a1", "b1", "c1", "a1"}; !slices.Equal(got, want) {
		t.Errorf("polls with a panicking selector = %v, want %v", got, want)
	}
	if _, err := f.p.PollOnce(context.Background()); err != nil {
		t.Errorf("PollOnce = %v", err)
	}
}
