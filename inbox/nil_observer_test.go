package inbox_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// ptrObserver is an InboxObserver of a pointer type, as the otel and
// prometheus modules' are.
type ptrObserver struct{}

func (*ptrObserver) ProcessInbox(ctx context.Context, _ core.InboxMessage) (context.Context, func(core.InboxResult)) {
	return ctx, func(core.InboxResult) {}
}

// A nil value of an observer type (a *otel.Observer left nil) is refused
// by New and by DispatcherConfig.Validate, as the outbox refuses it: it
// was taken, and the first Process panicked on it.
func TestNilValueObserverIsRefused(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "in.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var obs *ptrObserver
	if _, err := inbox.New(ctx, db, inbox.Config{Observer: obs}); !slices.Equal(cfgpath.Fields(err), []string{"Observer"}) {
		t.Fatalf("New with a nil *ptrObserver = %v, want a ConfigError of field Observer", err)
	}
	if err := (inbox.Config{Observer: obs}).Validate(); !slices.Equal(cfgpath.Fields(err), []string{"Observer"}) {
		t.Fatalf("Config.Validate with a nil *ptrObserver = %v, want a ConfigError of field Observer", err)
	}
	if err := (inbox.DispatcherConfig{Observer: obs}).Validate(); !slices.Equal(cfgpath.Fields(err), []string{"Observer"}) {
		t.Fatalf("DispatcherConfig.Validate with a nil *ptrObserver = %v, want a ConfigError of field Observer", err)
	}
	in, err := inbox.New(ctx, db, inbox.Config{Observer: &ptrObserver{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.NewDispatcher(inbox.DispatcherConfig{Observer: obs}); !slices.Equal(cfgpath.Fields(err), []string{"Observer"}) {
		t.Fatalf("NewDispatcher with a nil *ptrObserver = %v, want a ConfigError of field Observer", err)
	}
}
