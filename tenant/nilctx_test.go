package tenant_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/tenant"
)

// A nil context is refused with core.ErrNilContext by the set's and a
// tenant's methods that take one, before anything runs (Get reached
// database/sql, which panicked holding its pool's lock).
func TestNilContextIsRefused(t *testing.T) {
	dbs := sqliteDatabases(t, 1)
	var nilCtx context.Context
	if _, err := tenant.New(nilCtx, tenant.Config{Databases: dbs}); !errors.Is(err, core.ErrNilContext) {
		t.Errorf("New(nil ctx) = %v, want ErrNilContext", err)
	}
	if _, err := tenant.NewInbox(nilCtx, tenant.InboxConfig{Databases: dbs}); !errors.Is(err, core.ErrNilContext) {
		t.Errorf("NewInbox(nil ctx) = %v, want ErrNilContext", err)
	}
	if _, err := tenant.Open(nilCtx, dbs[0]); !errors.Is(err, core.ErrNilContext) {
		t.Errorf("Open(nil ctx) = %v, want ErrNilContext", err)
	}
	o := newUnstarted(t, tenant.Config{Databases: dbs})
	tn, err := o.For(dbs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Start":         func() error { return o.Start(nilCtx) },
		"Refresh":       func() error { _, err := o.Refresh(nilCtx); return err },
		"SetDatabases":  func() error { _, err := o.SetDatabases(nilCtx, dbs); return err },
		"Get":           func() error { _, err := tn.Get(nilCtx, "x"); return err },
		"CountByStatus": func() error { _, err := tn.CountByStatus(nilCtx); return err },
		"InTx":          func() error { return tn.InTx(nilCtx, func(context.Context) error { return nil }) },
		"Close":         func() error { return o.Close(nilCtx) },
	} {
		if err := call(); !errors.Is(err, core.ErrNilContext) {
			t.Errorf("%s(nil ctx) = %v, want ErrNilContext", name, err)
		}
	}
	if _, err := tn.CountByStatus(t.Context()); err != nil {
		t.Errorf("CountByStatus after the refusals: %v", err)
	}
	// Also on a database that left the set: the nil context is the
	// first error (it was reported as the database leaving).
	if err := o.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tn.InTx(nilCtx, func(context.Context) error { return nil }); !errors.Is(err, core.ErrNilContext) {
		t.Errorf("InTx(nil ctx) after Close = %v, want ErrNilContext", err)
	}
}
