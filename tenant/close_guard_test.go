package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/tenant"
)

// tenant.Outbox.Close called from a listener with its context returns at
// once with dispatcher.ErrCloseInListener and stops nothing: the outbox
// still delivers afterwards.
func TestCloseFromListenerStopsNothing(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 1))
	o, err := tenant.New(context.Background(), tenant.Config{Databases: dbs, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = o.Close(ctx)
	})
	inListener := make(chan error, 2)
	o.RegisterFunc("OrderPlaced", func(ctx context.Context, _ core.Envelope) error {
		inListener <- o.Close(ctx)
		return nil
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}
	publish := func() {
		t.Helper()
		if err := tn.InTx(context.Background(), func(ctx context.Context) error {
			env, err := core.NewEvent("OrderPlaced").TenantID("s1").PayloadJSONString(`{}`).Build()
			if err != nil {
				return err
			}
			_, err = tn.Publish(ctx, env)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 { // the second delivery proves the first Close stopped nothing
		publish()
		select {
		case err := <-inListener:
			if !errors.Is(err, dispatcher.ErrCloseInListener) {
				t.Fatalf("delivery %d: Close from the listener = %v, want dispatcher.ErrCloseInListener", i+1, err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("delivery %d: the listener did not run (or Close did not return)", i+1)
		}
	}
}
