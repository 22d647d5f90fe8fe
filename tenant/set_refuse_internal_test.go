package tenant

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	_ "github.com/outbox-go/outbox/jdbcstore/sqlite"
)

type ownKey struct{}

// A removal refused up front (asked from a listener or handler of the
// database's own work) leaves the database in the set and routed to all
// along: it is not detached, and For finds it at every moment. It was
// deleted from the set first and put back once the detach refused, so
// For reported it unknown meanwhile.
func TestRemovalRefusedUpFrontKeepsTheDatabaseRouted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbs := []Database{
		{ID: "a", Driver: "sqlite3", DSN: filepath.Join(dir, "a.db")},
		{ID: "b", Driver: "sqlite3", DSN: filepath.Join(dir, "b.db")},
	}
	errOwn := errors.New("asked from its own work")
	var (
		s        *set[string]
		detached atomic.Int32
		unknown  atomic.Int32 // detaches that found their database unknown to get
	)
	o := setOptions{what: "test", databases: dbs, drain: time.Second, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		refuse: func(ctx context.Context, id string, _ any) error {
			if ctx.Value(ownKey{}) == id {
				return errOwn
			}
			return nil
		}}
	attach := func(_ context.Context, d Database, _ *sqlx.DB) (string, error) { return d.ID, nil }
	detach := func(_ context.Context, id string, _ string) error {
		detached.Add(1)
		if _, err := s.get(id); err != nil {
			unknown.Add(1)
		}
		return nil
	}
	var err error
	if s, err = newSet(ctx, o, attach, detach); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.closeAll() })

	res, err := s.apply(context.WithValue(ctx, ownKey{}, "a"), dbs[1:])
	if !errors.Is(err, errOwn) || len(res.Removed) != 0 || res.Unchanged != 2 {
		t.Fatalf("removal of a from its own work = %+v, %v; want it kept (Unchanged 2) and the refusal", res, err)
	}
	if n := detached.Load(); n != 0 {
		t.Errorf("the refused removal detached the database %d times, want never", n)
	}
	if _, err := s.get("a"); err != nil {
		t.Errorf("a after the refused removal: %v", err)
	}
	// Another goroutine's removal goes ahead; the database is unknown to
	// For from then on.
	res, err = s.apply(ctx, dbs[1:])
	if err != nil || len(res.Removed) != 1 || detached.Load() != 1 || unknown.Load() != 1 {
		t.Fatalf("removal of a = %+v, %v; detached %d (%d unknown), want it removed once", res, err, detached.Load(), unknown.Load())
	}
}
