package tenant_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
)

// nilHandler is a handler type whose nil pointer panics when called.
type nilHandler struct{ n int }

func (h *nilHandler) Handle(context.Context, inbox.Record) error { h.n++; return nil }

// The tenant inbox's Handle refuses a nil value of a handler type as the
// dispatcher's does: every message of the topic would panic in it and
// end Dead.
func TestInboxHandleRefusesANilValueOfAHandlerType(t *testing.T) {
	ctx := ibCtx(t)
	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: []tenant.Database{ibSQLite(t, "a")}})
	var nilFunc inbox.HandlerFunc
	if err := ib.Handle("t", nilFunc); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("Handle(inbox.HandlerFunc(nil)) = %v, want core.ErrInvalidConfig", err)
	}
	if err := ib.Handle("t", (*nilHandler)(nil)); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("Handle((*nilHandler)(nil)) = %v, want core.ErrInvalidConfig", err)
	}
	if err := ib.Handle("t", &nilHandler{}); err != nil {
		t.Errorf("Handle of a real handler after the refusals = %v", err)
	}
}

// nilSelector is a selector type whose nil pointer panics when called.
type nilSelector struct{ first bool }

func (s *nilSelector) Next(ids []string, last string, n int) string {
	if s.first {
		return ids[0]
	}
	return core.RoundRobin{}.Next(ids, last, n)
}

// A nil value of a selector type is refused before any database opens,
// named by its path: the poller's and the inbox dispatcher's loops called
// it at their first cycle over two databases and the process died.
func TestNilSelectorValueIsRefused(t *testing.T) {
	ctx := ibCtx(t)
	dbs := sqliteDatabases(t, 2)
	_, err := tenant.New(ctx, tenant.Config{Databases: dbs, Poller: poller.Config{Selector: (*nilSelector)(nil)}})
	if !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(cfgpath.Fields(err), []string{"Poller.Selector"}) {
		t.Errorf("tenant.New = %v, want one problem of Poller.Selector", err)
	}
	_, err = tenant.NewInbox(ctx, tenant.InboxConfig{Databases: dbs, Dispatcher: inbox.DispatcherConfig{Selector: (*nilSelector)(nil)}})
	if !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(cfgpath.Fields(err), []string{"Dispatcher.Selector"}) {
		t.Errorf("tenant.NewInbox = %v, want one problem of Dispatcher.Selector", err)
	}
	for _, d := range dbs {
		if _, err := os.Stat(d.DSN); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("database %s opened by a refused configuration: %v", d.ID, err)
		}
	}
}

// nilMetrics is a Metrics and Observer type whose nil pointer is no
// value (a nil *prometheus.Collector).
type nilMetrics struct {
	core.NopMetrics
	n int
}

func (m *nilMetrics) Publish(context.Context, core.Envelope) (map[string]string, func(error)) {
	m.n++
	return nil, func(error) {}
}

func (m *nilMetrics) Deliver(ctx context.Context, _ core.Delivery) (context.Context, func(core.DeliveryResult)) {
	m.n++
	return ctx, func(core.DeliveryResult) {}
}

func (m *nilMetrics) DoneWritten(string, int, time.Duration, error) { m.n++ }

func (m *nilMetrics) Claimed(string, int, time.Duration, error) { m.n++ }

// A nil value of a Metrics or Observer type set in Config is refused under
// the name of the field set: it was reported as Dispatcher.Metrics and
// Dispatcher.Observer, fields the caller never set.
func TestNilMetricsAndObserverAreNamedAsSet(t *testing.T) {
	ctx := ibCtx(t)
	_, err := tenant.New(ctx, tenant.Config{Databases: sqliteDatabases(t, 1), Metrics: (*nilMetrics)(nil), Observer: (*nilMetrics)(nil)})
	if got := cfgpath.Fields(err); !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(got, []string{"Metrics", "Observer"}) {
		t.Errorf("tenant.New = %v (fields %v), want problems of Metrics and Observer", err, got)
	}
}
