package tenant_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
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
