package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
)

// The events a Close released, and one published unowned on a plain
// transaction, just before the next process starts are delivered by its
// first polls (several: BatchSize 2): they were younger than
// Poller.SkipRecent, left for the next poll a whole Interval later (5 s by
// default; an hour here), and a first version took only the first batch.
func TestFirstPollTakesRecentlyReleasedEvents(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "restart.db")
	first, err := outbox.New(ctx, db, outbox.Config{Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for range 7 { // published, never started: leased to first until Close releases them
		if err := first.InTx(ctx, func(ctx context.Context) error {
			id, err := first.Publish(ctx, event(t))
			want[id] = true
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := outbox.New(ctx, db, outbox.Config{Logger: (&testsupport.LogBuffer{}).Logger(),
		Poller: poller.Config{Interval: time.Hour, SkipRecent: time.Hour, BatchSize: 2}}) // several polls' worth
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := second.PublishTx(ctx, tx, event(t))
	if err != nil {
		t.Fatal(err)
	}
	want[id] = true
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got = map[string]bool{}
	)
	second.RegisterAllFunc(func(_ context.Context, env core.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		got[env.ID()] = true
		return nil
	})
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close(ctx) })
	testsupport.WaitFor(t, 20*time.Second, "the released and unowned events at the first poll", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(want)
	})
}

// A tenant set's first poll of each database does the same.
func TestTenantFirstPollTakesRecentlyReleasedEvents(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbs := []tenant.Database{{ID: "a", Driver: "sqlite3", DSN: dir + "/a.db"}, {ID: "b", Driver: "sqlite3", DSN: dir + "/b.db"}}
	cfg := tenant.Config{Databases: dbs, Logger: (&testsupport.LogBuffer{}).Logger(),
		Poller: poller.Config{Interval: time.Hour, SkipRecent: time.Hour}}
	first, err := tenant.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dbs {
		tn, err := first.For(d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := tn.InTx(ctx, func(ctx context.Context) error {
			_, err := tn.Publish(ctx, event(t))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := tenant.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	second.RegisterAllFunc(func(ctx context.Context, _ core.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		got[tenant.StoreID(ctx)]++
		return nil
	})
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close(ctx) })
	testsupport.WaitFor(t, 20*time.Second, "each database's released event at its first poll", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["a"] == 1 && got["b"] == 1
	})
}
