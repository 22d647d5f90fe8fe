package tenant_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/tenant"
)

// storeRecorder is an InboxObserver that records the store and mode of
// every processing.
type storeRecorder struct {
	mu   sync.Mutex
	seen []string // "store mode message id"
	wake chan struct{}
}

func (r *storeRecorder) ProcessInbox(ctx context.Context, m core.InboxMessage) (context.Context, func(core.InboxResult)) {
	r.mu.Lock()
	r.seen = append(r.seen, m.Store+" "+m.Mode.String()+" "+m.MessageID)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return ctx, func(core.InboxResult) {}
}

func (r *storeRecorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.seen, s)
}

// A tenant inbox reports every processing with its database's id as the
// store: the queued ones (the dispatcher knows it) and the transactional
// ones (Process, ProcessTx), which used to be reported with store "" and
// so counted together for every database.
func TestInboxObserverStoreIsTheDatabaseID(t *testing.T) {
	ctx := ibCtx(t)
	rec := &storeRecorder{wake: make(chan struct{}, 1)}
	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: []tenant.Database{ibSQLite(t, "s1"), ibSQLite(t, "s2")},
		Inbox: inbox.Config{Observer: rec}, Dispatcher: inbox.DispatcherConfig{PollInterval: 10 * time.Millisecond}})
	if err := ib.HandleFunc("t", func(context.Context, inbox.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2"} {
		in := ibFor(t, ib, id)
		if _, err := in.Process(ctx, inbox.Message{Source: "psp", MessageID: "tx-" + id, Payload: []byte("{}")},
			func(context.Context, *sqlx.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		ibEnqueue(t, ctx, in, "psp", "q-"+id, "t", "{}")
	}
	ibStart(t, ctx, ib)
	for _, id := range []string{"s1", "s2"} {
		for _, want := range []string{id + " transactional tx-" + id, id + " queued q-" + id} {
			ibWaitFor(t, "the observer saw "+want, func() bool { return rec.has(want) })
		}
	}
	if rec.has(" transactional tx-s1") || rec.has(" transactional tx-s2") {
		t.Errorf("a transactional processing reported with store \"\": %v", rec.seen)
	}
}

// tenant.Inbox.Close called by a handler with its own context returns
// inbox.ErrCloseInHandler at once and closes nothing.
func TestInboxCloseFromHandler(t *testing.T) {
	ctx := ibCtx(t)
	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: []tenant.Database{ibSQLite(t, "s1")},
		Dispatcher: inbox.DispatcherConfig{PollInterval: 10 * time.Millisecond}})
	closed := make(chan error, 1)
	if err := ib.HandleFunc("t", func(ctx context.Context, _ inbox.Record) error {
		closed <- ib.Close(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	in := ibFor(t, ib, "s1")
	ibEnqueue(t, ctx, in, "psp", "m", "t", "{}")
	ibStart(t, ctx, ib)
	select {
	case err := <-closed:
		if !errors.Is(err, inbox.ErrCloseInHandler) {
			t.Fatalf("Close from a handler = %v, want inbox.ErrCloseInHandler", err)
		}
	case <-ctx.Done():
		t.Fatal("Close from a handler blocked")
	}
	ibWaitFor(t, "the message Done", func() bool { return ibStatus(t, ctx, in, "psp", "m") == inbox.StatusDone })
	if _, err := ib.For("s1"); err != nil {
		t.Errorf("For after the refused Close: %v", err)
	}
}

// A handler removing its own database from the set (SetDatabases without
// it) with its context gets an error wrapping inbox.ErrCloseInHandler,
// and the database stays, open and served: its own message is Done, and
// the database is removed from another goroutine afterwards (before, it
// left the routing and its pool was closed while the dispatcher kept
// claiming from it, and it could never rejoin the set).
func TestInboxRemoveOwnDatabaseFromHandler(t *testing.T) {
	ctx := ibCtx(t)
	dbs := []tenant.Database{ibSQLite(t, "s1"), ibSQLite(t, "s2")}
	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: dbs,
		Dispatcher: inbox.DispatcherConfig{PollInterval: 10 * time.Millisecond}})
	type result struct {
		res tenant.RefreshResult
		err error
	}
	got := make(chan result, 1)
	if err := ib.HandleFunc("tenant.deleted", func(hctx context.Context, _ inbox.Record) error {
		res, err := ib.SetDatabases(hctx, dbs[1:])
		got <- result{res, err}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	in := ibFor(t, ib, "s1")
	ibEnqueue(t, ctx, in, "admin", "del-s1", "tenant.deleted", "{}")
	ibStart(t, ctx, ib)
	var r result
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatal("SetDatabases from a handler blocked")
	}
	if !errors.Is(r.err, inbox.ErrCloseInHandler) || len(r.res.Removed) != 0 {
		t.Fatalf("SetDatabases from a handler of its own database = %+v, %v; want nothing removed and inbox.ErrCloseInHandler", r.res, r.err)
	}
	ibWaitFor(t, "the handler's message Done", func() bool { return ibStatus(t, ctx, in, "admin", "del-s1") == inbox.StatusDone })
	res, err := ib.SetDatabases(ctx, dbs[1:])
	if err != nil || !slices.Equal(res.Removed, []string{"s1"}) {
		t.Fatalf("SetDatabases from outside = %+v, %v; want s1 removed", res, err)
	}
	if res, err := ib.SetDatabases(ctx, dbs); err != nil || !slices.Equal(res.Added, []string{"s1"}) {
		t.Fatalf("adding s1 back = %+v, %v", res, err)
	}
}
