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
