package inbox_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
)

// fieldSelector is a selector whose nil pointer panics when called.
type fieldSelector struct{ first bool }

func (s *fieldSelector) Next(ids []string, last string, n int) string {
	if s.first {
		return ids[0]
	}
	return core.RoundRobin{}.Next(ids, last, n)
}

// bugSelector panics on every call.
type bugSelector struct{}

func (bugSelector) Next([]string, string, int) string { panic("a bug in the selector") }

// A nil value of a selector type is refused by DispatcherConfig's
// validation, as a nil Retry policy is: the dispatcher's loop called it
// at its first claim cycle over two inboxes and the process died.
func TestDispatcherConfigRefusesANilSelectorValue(t *testing.T) {
	cfg := inbox.DispatcherConfig{Selector: (*fieldSelector)(nil)}
	if err := cfg.Validate(); !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(cfgpath.Fields(err), []string{"Selector"}) {
		t.Errorf("Validate = %v, want one problem of Selector", err)
	}
	if _, err := inbox.NewMultiDispatcher(cfg); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("NewMultiDispatcher = %v, want core.ErrInvalidConfig", err)
	}
	e := newEnv(t, openSQLite, inbox.Config{})
	if _, err := e.in.NewDispatcher(cfg); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("NewDispatcher = %v, want core.ErrInvalidConfig", err)
	}
	if err := (inbox.DispatcherConfig{Selector: &fieldSelector{}}).Validate(); err != nil {
		t.Errorf("Validate of a real selector = %v", err)
	}
}

// A selector that panics does not kill the dispatcher (and the process):
// its claim cycles take round-robin order, every inbox's messages are
// handled, and the panic is logged once at WARN.
func TestDispatcherSurvivesAPanickingSelector(t *testing.T) {
	me := newMultiEnv(t, openSQLite, []string{"a", "b"}, inbox.DispatcherConfig{
		Selector: bugSelector{}, PollInterval: time.Hour, Workers: 1, BatchSize: 1,
	})
	var mu sync.Mutex
	handled := map[string]bool{}
	all := make(chan struct{})
	mustHandle(t, me.d, "t", func(ctx context.Context, r inbox.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[inbox.StoreID(ctx)+"/"+r.MessageID] = true
		if len(handled) == 4 {
			close(all)
		}
		return nil
	})
	for _, id := range []string{"a", "b"} {
		for _, m := range []string{"1", "2"} {
			me.envs[id].enqueue(inbox.Message{Source: "s", MessageID: m, Topic: "t"})
		}
	}
	me.start()
	select {
	case <-all:
	case <-time.After(waitTimeout):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("handled %v, want both messages of both inboxes", handled)
	}
	// The claims that took the messages followed the selector's calls.
	if n := me.logs.Count("level=WARN", "selector panicked"); n != 1 {
		t.Errorf("%d lines about the panic, want 1:\n%s", n, me.logs.String())
	}
}
