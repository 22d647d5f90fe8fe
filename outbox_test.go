package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

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
