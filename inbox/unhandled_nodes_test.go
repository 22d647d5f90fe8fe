package inbox_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// unhandledSeen is an InboxObserver that signals each handling that
// found no handler.
type unhandledSeen struct {
	n  atomic.Int32
	ch chan struct{}
}

func (u *unhandledSeen) ProcessInbox(ctx context.Context, _ core.InboxMessage) (context.Context, func(core.InboxResult)) {
	return ctx, func(r core.InboxResult) {
		if r.Outcome == core.InboxUnhandled {
			u.n.Add(1)
			select {
			case u.ch <- struct{}{}:
			default:
			}
		}
	}
}

// A message a node without its topic's handler put off is taken by a
// node that has the handler, not by the node that put it off: that one
// set an alarm for the moment it came due, claimed it again and put it
// off again, for as long as it ran (the newer node got it late, or not
// at all).
func TestUnhandledMessageIsForAnotherNode(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inbox.db")
	open := func() *inbox.Inbox {
		db, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		in, err := inbox.New(ctx, db, inbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	inOld, inNew := open(), open()
	seen := &unhandledSeen{ch: make(chan struct{}, 1)}
	old, err := inOld.NewDispatcher(inbox.DispatcherConfig{UnhandledDelay: 50 * time.Millisecond, PollInterval: time.Hour, Observer: seen})
	if err != nil {
		t.Fatal(err)
	}
	old.HandleFunc("Other", func(context.Context, inbox.Record) error { return nil })
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Close(ctx) })
	if err := inOld.Enqueue(ctx, inbox.Message{Source: "s", MessageID: "m", Topic: "T", Payload: []byte{}}); err != nil {
		t.Fatal(err)
	}
	testsupport.Recv(t, 20*time.Second, seen.ch, "the old node to put the message off")

	handled := make(chan struct{})
	newer, err := inNew.NewDispatcher(inbox.DispatcherConfig{PollInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	newer.HandleFunc("T", func(context.Context, inbox.Record) error { close(handled); return nil })
	if err := newer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = newer.Close(ctx) })
	testsupport.Recv(t, 20*time.Second, handled, "the node with the handler to handle the message")
	if n := seen.n.Load(); n != 1 {
		t.Errorf("the node without the handler took the message %d times, want once", n)
	}
}
