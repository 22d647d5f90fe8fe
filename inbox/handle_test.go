package inbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
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
	_, err = inbox.New(ctx, db.DB, inbox.Config{Table: "bad-name", MaxErrorLen: -1})
	if !errors.Is(err, core.ErrInvalidIdentifier) || len(cfgpath.Fields(err)) != 2 {
		t.Fatalf("bad config: %v", err)
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
