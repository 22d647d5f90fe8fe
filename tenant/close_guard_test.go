package tenant_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
)

// tenant.Outbox.Close called from a listener with its context returns at
// once with dispatcher.ErrCloseInListener and stops nothing: the outbox
// still delivers afterwards.
func TestCloseFromListenerStopsNothing(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 1))
	o := newUnstarted(t, tenant.Config{Databases: dbs})
	inListener := make(chan error, 2)
	o.RegisterFunc("OrderPlaced", func(ctx context.Context, _ core.Envelope) error {
		inListener <- o.Close(ctx)
		return nil
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	publishOne := func() {
		t.Helper()
		if _, err := publish(context.Background(), o, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 { // the second delivery proves the first Close stopped nothing
		publishOne()
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
	o := newUnstarted(t, tenant.Config{Databases: dbs, DrainTimeout: time.Hour,
		Poller: poller.Config{Interval: 20 * time.Millisecond, SkipRecent: time.Millisecond}})
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
		if _, err := publish(context.Background(), o, "s1"); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if !errors.Is(r.err, dispatcher.ErrCloseInListener) || len(r.res.Removed) != 0 {
				t.Fatalf("delivery %d: SetDatabases from a listener of its own database = %+v, %v; want nothing removed and dispatcher.ErrCloseInListener", i+1, r.res, r.err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("delivery %d: the listener did not run, or SetDatabases blocked", i+1)
		}
	}
	// Still polled: an event committed on a plain transaction (no hot
	// path) is delivered by the poller. (The removal stopped polling the
	// database before the dispatcher refused it, and nothing put it back.)
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}
	cold, err := core.NewEvent("OrderPlaced").TenantID("s1").PayloadJSONString(`{"n":2}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := tn.DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.PublishTx(context.Background(), tx, cold); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if !errors.Is(r.err, dispatcher.ErrCloseInListener) {
			t.Fatalf("the poller's delivery: SetDatabases from its listener = %+v, %v", r.res, r.err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("an event committed on a plain transaction was not delivered: the database is no longer polled")
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
	// One line: pgx puts each address it tried on a line of its own (a
	// closed port here), which came through as it was.
	_, err := tenant.Open(ctx, tenant.Database{ID: "t", Driver: "pgx",
		DSN: "host=127.0.0.1 port=1 user=postgres password=Secr3tPW dbname=test connect_timeout=2"})
	if err == nil || strings.ContainsAny(err.Error(), "\n\t") || strings.Contains(err.Error(), "r3tPW") {
		t.Errorf("Open on a closed port = %q, want one line without the password", err)
	}
}

// newUnstarted builds a tenant.Outbox with a quiet logger, not started,
// closed when the test ends (its Close error is the test's business).
func newUnstarted(t *testing.T, cfg tenant.Config) *tenant.Outbox {
	t.Helper()
	cfg.Logger = quietLogger()
	o, err := tenant.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = o.Close(ctx)
	})
	return o
}
