package tenant_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/tenant"
)

// Databases left nil (and no Discover) is refused by New and NewInbox: a
// Config that names no set at all is a mistake. An empty, non-nil
// Databases is a set of no database, as documented: the outbox or inbox
// starts serving none, and SetDatabases adds them later (as it may also
// remove them all).
func TestEmptyDatabasesStartsWithNone(t *testing.T) {
	ctx := ibCtx(t)
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(cfgpath.Fields(err), []string{"Databases"}) ||
			!strings.Contains(err.Error(), "must be set, or Discover") {
			t.Errorf("%s with nil Databases = %v, want the Databases problem", what, err)
		}
	}
	_, err := tenant.New(ctx, tenant.Config{})
	refused("New", err)
	_, err = tenant.NewInbox(ctx, tenant.InboxConfig{})
	refused("NewInbox", err)

	dbs := sqliteDatabases(t, 1)
	o, _ := newOutbox(t, tenant.Config{Databases: []tenant.Database{}})
	if ids := o.StoreIDs(); len(ids) != 0 {
		t.Errorf("outbox of an empty set serves %v", ids)
	}
	if res, err := o.SetDatabases(ctx, dbs); err != nil || !slices.Equal(res.Added, []string{"s1"}) {
		t.Errorf("outbox SetDatabases = %+v, %v; want s1 added", res, err)
	}
	if _, err := o.For("s1"); err != nil {
		t.Errorf("outbox For(s1) after SetDatabases: %v", err)
	}

	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: []tenant.Database{}, Dispatcher: inbox.DispatcherConfig{PollInterval: time.Hour}})
	if ids := ib.StoreIDs(); len(ids) != 0 {
		t.Errorf("inbox of an empty set serves %v", ids)
	}
	handled := make(chan string, 1)
	if err := ib.HandleFunc("t", func(_ context.Context, r inbox.Record) error { handled <- r.MessageID; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := ib.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a := ibSQLite(t, "a")
	if res, err := ib.SetDatabases(ctx, []tenant.Database{a}); err != nil || !slices.Equal(res.Added, []string{"a"}) {
		t.Fatalf("inbox SetDatabases = %+v, %v; want a added", res, err)
	}
	in, err := ib.For("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Enqueue(ctx, inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-handled:
		if id != "m" {
			t.Errorf("handled %q, want m", id)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the message of a database added to an empty set was not handled")
	}
}
