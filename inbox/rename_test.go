package inbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// An inbox table renamed away keeps its indexes, whose names SQLite
// holds per database: New on a new table of the old name refuses it,
// naming the index and the table holding it, instead of leaving the new
// table without its indexes.
func TestNewAfterTheTableWasRenamed(t *testing.T) {
	db := openSQLite(t)
	ctx := context.Background()
	if _, err := inbox.New(ctx, db, inbox.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("ALTER TABLE " + inbox.DefaultTable + " RENAME TO inbox_archive"); err != nil {
		t.Fatal(err)
	}
	_, err := inbox.New(ctx, db, inbox.Config{})
	var ce *core.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `belongs to the table "inbox_archive"`) {
		t.Fatalf("New after the rename = %v, want a *core.ConfigError naming inbox_archive", err)
	}
}
