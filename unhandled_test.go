package outbox_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/poller"
)

// openStarted opens an outbox on a fresh SQLite file, starts it and closes
// it (and the database) when the test ends.
func openStarted(t *testing.T, cfg outbox.Config, register func(*outbox.Outbox)) *outbox.Outbox {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ob, err := outbox.New(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if register != nil {
		register(ob)
	}
	startUntilCleanup(t, ob)
	return ob
}

func publish(t *testing.T, ob *outbox.Outbox, eventType string) string {
	t.Helper()
	env, err := outbox.NewEvent(eventType).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := ob.InTx(context.Background(), func(ctx context.Context) (err error) {
		id, err = ob.Publish(ctx, env)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitRow polls the row until cond holds, or fails after 10 s.
func waitRow(t *testing.T, ob *outbox.Outbox, id, what string, cond func(core.Record) bool) core.Record {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond) // a database row gives no signal: poll it
	defer tick.Stop()
	for {
		r, err := ob.Get(context.Background(), id)
		if err == nil && cond(r) {
			return r
		}
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s: row %+v, err %v", what, r, err)
		case <-tick.C:
		}
	}
}

// RegisterAllFunc is the Outbox's: a function listener for every event.
func TestRegisterAllFunc(t *testing.T) {
	got := make(chan string, 2)
	ob := openStarted(t, outbox.Config{}, func(ob *outbox.Outbox) {
		ob.RegisterAllFunc(func(_ context.Context, env core.Envelope) error { got <- env.Type(); return nil })
	})
	publish(t, ob, "A")
	publish(t, ob, "B")
	seen := map[string]bool{}
	for range 2 {
		select {
		case typ := <-got:
			seen[typ] = true
		case <-time.After(10 * time.Second):
			t.Fatal("the RegisterAllFunc listener was not called")
		}
	}
	if !seen["A"] || !seen["B"] {
		t.Fatalf("listener saw %v, want A and B", seen)
	}
}

// With Dispatcher.Unhandled = UnhandledLeave an event published before its
// listener exists is put off (no attempt charged) and delivered by the
// poller once a listener was registered.
func TestUnhandledLeaveDeliversToALaterListener(t *testing.T) {
	ob := openStarted(t, outbox.Config{
		Dispatcher: dispatcher.Config{Unhandled: dispatcher.UnhandledLeave, UnhandledDelay: 100 * time.Millisecond},
		Poller:     poller.Config{Interval: 20 * time.Millisecond, SkipRecent: -1},
	}, nil)
	id := publish(t, ob, "Later")
	r := waitRow(t, ob, id, "the event to be put off", func(r core.Record) bool { return r.LastError != "" })
	if r.Status != core.StatusNew || r.Attempts != 0 || !strings.Contains(r.LastError, "no listener") {
		t.Fatalf("put-off row: %v attempts %d last_error %q; want NEW, 0, no listener", r.Status, r.Attempts, r.LastError)
	}
	ob.RegisterFunc("Later", func(context.Context, core.Envelope) error { return nil })
	r = waitRow(t, ob, id, "DONE", func(r core.Record) bool { return r.Status == core.StatusDone })
	if r.Attempts != 0 {
		t.Errorf("attempts %d, want 0", r.Attempts)
	}
}

// unhandledCounter is an Observer counting the attempts that found no
// listener.
type unhandledCounter struct {
	core.NopObserver
	n atomic.Int32
}

func (c *unhandledCounter) Deliver(ctx context.Context, _ core.Delivery) (context.Context, func(core.DeliveryResult)) {
	return ctx, func(r core.DeliveryResult) {
		if r.Outcome == core.OutcomeUnhandled {
			c.n.Add(1)
		}
	}
}

// An event a node without its listener left for later (UnhandledLeave)
// is taken by a node that has the listener when it comes due, not by the
// node that left it: that node woke its own poller exactly then, re-took
// the event and put it off again, for as long as it ran (in a rolling
// deploy the newer nodes never got such events until the old ones
// stopped).
func TestUnhandledLeaveIsForAnotherNode(t *testing.T) {
	db := sqliteDB(t, "nodes.db")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	counter := &unhandledCounter{}
	old, err := outbox.New(context.Background(), db, outbox.Config{Logger: quiet, Observer: counter,
		Dispatcher: dispatcher.Config{Owner: "old", Unhandled: dispatcher.UnhandledLeave, UnhandledDelay: 50 * time.Millisecond},
		Poller:     poller.Config{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	startUntilCleanup(t, old)
	newer, err := outbox.New(context.Background(), db, outbox.Config{Logger: quiet,
		Dispatcher: dispatcher.Config{Owner: "new"},
		Poller:     poller.Config{Interval: 300 * time.Millisecond, SkipRecent: -1}})
	if err != nil {
		t.Fatal(err)
	}
	delivered := make(chan struct{})
	newer.RegisterFunc("Later", func(context.Context, core.Envelope) error { close(delivered); return nil })
	startUntilCleanup(t, newer)

	id := publish(t, old, "Later") // the hot path: old's worker finds no listener
	testsupport.Recv(t, 20*time.Second, delivered, "the event delivered by the node with the listener")
	waitRow(t, newer, id, "DONE", func(r core.Record) bool { return r.Status == core.StatusDone })
	if n := counter.n.Load(); n != 1 {
		t.Errorf("the node without the listener took the event %d times, want once (its hot path)", n)
	}
}
