package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/writegate"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewRejectsBadConfig(t *testing.T) {
	ctx := context.Background()
	if _, err := outbox.New[*sql.DB](ctx, nil, outbox.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("nil db: %v", err)
	}
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cases := map[string]func(*outbox.Config){
		"table":   func(c *outbox.Config) { c.Store.Table = "bad;name" },
		"workers": func(c *outbox.Config) { c.Dispatcher.Workers = -1 },
		"batch":   func(c *outbox.Config) { c.Poller.BatchSize = -5 },
	}
	for name, tweak := range cases {
		var cfg outbox.Config
		tweak(&cfg)
		if _, err := outbox.New(ctx, db, cfg); err == nil {
			t.Errorf("%s: New accepted an invalid config", name)
		} else if !errors.Is(err, core.ErrInvalidConfig) && !errors.Is(err, core.ErrInvalidIdentifier) {
			t.Errorf("%s: error %v does not wrap ErrInvalidConfig/ErrInvalidIdentifier", name, err)
		}
	}
}

// On SQLite, New hands the store's write gate to its transaction manager:
// the gate exists once New returns (the manager takes writegate.Of of the
// pool), so business transactions take turns with the status writes.
func TestNewWiresTheSQLiteWriteGate(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := outbox.New(context.Background(), db, outbox.Config{}); err != nil {
		t.Fatal(err)
	}
	if writegate.Of(db.DB) == nil {
		t.Fatal("no write gate registered for the SQLite pool")
	}
}

func TestSkipSchemaAndDisablePoller(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ob, err := outbox.New(ctx, db, outbox.Config{SkipSchema: true, DisablePoller: true})
	if err != nil {
		t.Fatal(err)
	}
	if parts.Outbox(ob).Poller != nil {
		t.Fatal("poller built although disabled")
	}
	var n int
	if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'outbox_event'`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("schema applied although SkipSchema")
	}
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ob.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Close whose ctx ends while a listener still runs returns ctx's error
// itself, as the Close contract says: it returned the errors of its
// parts joined (ctx's, from the dispatcher, alone), which errors.Is
// matched but == did not.
func TestCloseReturnsCtxErrorItself(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	ob := openStarted(t, outbox.Config{}, func(ob *outbox.Outbox) {
		ob.RegisterFunc("Slow", func(context.Context, outbox.Envelope) error {
			started <- struct{}{}
			<-release // deaf to ctx, as a listener stuck in a call may be
			return nil
		})
	})
	publish(t, ob, "Slow")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener was not called")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := ob.Close(ctx)
	close(release)
	if err != context.DeadlineExceeded {
		t.Fatalf("Close with the listener running = %#v, want context.DeadlineExceeded itself", err)
	}
}

// Close after a Close that finished is nil, also with a done context: it
// returned that context's error about half the time (the poller's loop
// having ended and the context being done were raced by a select).
func TestCloseAfterCloseIsNilWithADoneContext(t *testing.T) {
	ob := openStarted(t, outbox.Config{}, nil)
	if err := ob.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 50 {
		if err := ob.Close(done); err != nil {
			t.Fatalf("Close %d with a cancelled context after a finished Close = %v, want nil", i+2, err)
		}
	}
}
