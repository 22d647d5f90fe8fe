package inbox

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A closed dispatcher leaves its inboxes: their enqueues no longer notify
// it, nor keep it reachable (a service creating and closing dispatchers on
// one long-lived Inbox kept every one of them), and adding an inbox to it
// afterwards is refused with core.ErrClosed.
func TestCloseUnregistersFromTheInboxes(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	in, err := New(ctx, db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(ctx, db, Config{Table: "inbox_other"})
	if err != nil {
		t.Fatal(err)
	}
	registered := func() int {
		in.mu.Lock()
		defer in.mu.Unlock()
		return len(in.members)
	}
	for range 3 {
		d, err := in.NewDispatcher(DispatcherConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.AddInbox("other", other); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("AddInbox after Close = %v, want core.ErrClosed", err)
		}
	}
	// Never started, then closed.
	d, err := in.NewDispatcher(DispatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := registered(); n != 0 {
		t.Fatalf("%d closed dispatchers still registered with the inbox, want 0", n)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if n := len(other.members); n != 0 {
		t.Fatalf("the inbox added after Close is registered with %d dispatchers, want 0", n)
	}
}
