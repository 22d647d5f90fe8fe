package tenant_test

import (
	"context"
	"errors"
	"strings"
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
	publish := func() { t.Helper(); publishOrderPlaced(t, o, "s1") }
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

// A listener removing its own database from the set (SetDatabases without
// it) with its context gets an error wrapping dispatcher.ErrCloseInListener
// at once, and the database stays, open and served: its event is DONE and
// later events of it are delivered. (Before, the removal waited for the
// listener, that is for itself, until DrainTimeout, then closed the pool
// under it.)
func TestRemoveOwnDatabaseFromListener(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 2))
	o, err := tenant.New(context.Background(), tenant.Config{Databases: dbs, Logger: quietLogger(), DrainTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = o.Close(ctx)
	})
	type result struct {
		res tenant.RefreshResult
		err error
	}
	got := make(chan result, 2)
	o.RegisterFunc("OrderPlaced", func(ctx context.Context, _ core.Envelope) error {
		res, err := o.SetDatabases(ctx, dbs[1:])
		got <- result{res, err}
		return nil
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second delivery proves the database is still served
		publishOrderPlaced(t, o, "s1")
		select {
		case r := <-got:
			if !errors.Is(r.err, dispatcher.ErrCloseInListener) || len(r.res.Removed) != 0 {
				t.Fatalf("delivery %d: SetDatabases from a listener of its own database = %+v, %v; want nothing removed and dispatcher.ErrCloseInListener", i+1, r.res, r.err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("delivery %d: the listener did not run, or SetDatabases blocked", i+1)
		}
	}
}

// tenant.Open's error never shows a password of the DSN, nor a piece of
// one, whatever the form the driver quotes it in (pgx quotes a DSN it
// cannot parse, masking only what it took for the password).
func TestOpenErrorHidesThePassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dsn := range []string{
		"postgres://postgres:Sec@r3tPW@127.0.0.1:badport/test",
		"postgres://postgres:Sec:r3tPW@127.0.0.1:badport/test",
		"host=127.0.0.1 port=x user=postgres password='Sec r3tPW' dbname=test",
		"host=127.0.0.1 port=x user=postgres password = Secr3tPW dbname=test",
		`host=127.0.0.1 port=x user=postgres password=Sec\ r3tPW dbname=test`,
		`host=127.0.0.1 port=x user=postgres password='Sec\'r3tPW' dbname=test`,
	} {
		db, err := tenant.Open(ctx, tenant.Database{ID: "t", Driver: "pgx", DSN: dsn})
		if err == nil {
			_ = db.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if strings.Contains(err.Error(), "r3tPW") {
			t.Errorf("Open(%q) = %v: the error shows a piece of the password", dsn, err)
		}
	}
}

// publishOrderPlaced publishes an OrderPlaced event of tenant id through
// its database of o, in a transaction of its own.
func publishOrderPlaced(t *testing.T, o *tenant.Outbox, id string) {
	t.Helper()
	tn, err := o.For(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.InTx(context.Background(), func(ctx context.Context) error {
		env, err := core.NewEvent("OrderPlaced").TenantID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			return err
		}
		_, err = tn.Publish(ctx, env)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
