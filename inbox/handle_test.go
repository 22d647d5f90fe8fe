package inbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/retry"
)

// New takes a *sql.DB as well as a *sqlx.DB, and reports every problem of
// its Config at once before it creates the table.
func TestNewTakesSQLDB(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "in.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = inbox.New(ctx, db.DB, inbox.Config{Table: "bad-name", MaxErrorLen: -1, Backoff: retry.PolicyFunc(nil)})
	if !errors.Is(err, core.ErrInvalidIdentifier) || len(cfgpath.Fields(err)) != 3 {
		t.Fatalf("bad config: %v", err)
	}
	// MaxErrorLen is bounded as the outbox's is (MySQL's TEXT column).
	if _, err := inbox.New(ctx, db.DB, inbox.Config{MaxErrorLen: jdbcstore.MaxMaxErrorLen + 1}); !slices.Equal(cfgpath.Fields(err), []string{"MaxErrorLen"}) {
		t.Fatalf("MaxErrorLen %d: %v", jdbcstore.MaxMaxErrorLen+1, err)
	}
	var nilCtx context.Context
	if _, err := inbox.New(nilCtx, db.DB, inbox.Config{}); !errors.Is(err, core.ErrNilContext) {
		t.Fatalf("New(nil ctx) = %v, want ErrNilContext", err)
	}
	var n int
	if err := db.Get(&n, `SELECT COUNT(*) FROM sqlite_master WHERE name = ?`, inbox.DefaultTable); err != nil || n != 0 {
		t.Fatalf("table created by a failed New: %d, %v", n, err)
	}
	in, err := inbox.New(ctx, db.DB, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Enqueue(ctx, inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if rec, err := in.Get(ctx, "s", "m"); err != nil || rec.Status != inbox.StatusProcessing {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
}

// A Backoff that panics does not panic Abandon (inside its transaction):
// the message gets retry.Exponential's delay for that attempt.
func TestAbandonWithAPanickingBackoff(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "in.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bug := retry.PolicyFunc(func(int) time.Duration { panic("a bug in the backoff") })
	in, err := inbox.New(ctx, db, inbox.Config{Backoff: bug})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Enqueue(ctx, inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	recs, err := in.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("Claim = %v, %v", recs, err)
	}
	if n, err := in.Abandon(ctx, "w", []inbox.Key{recs[0].Key()}, "failed"); err != nil || n != 1 {
		t.Fatalf("Abandon = %d, %v", n, err)
	}
	rec, err := in.Get(ctx, "s", "m")
	if err != nil || rec.Status != inbox.StatusProcessing || !rec.NextAttemptAt.After(time.Now()) {
		t.Errorf("after Abandon: %+v, %v; want it due again later", rec, err)
	}
}
