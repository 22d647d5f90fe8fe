package inbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// CheckTable tells an inbox table from a missing one and from a table
// that is no inbox table, reading only.
func TestCheckTable(t *testing.T) {
	db := openSQLite(t)
	ctx := context.Background()
	if _, err := db.Exec("CREATE TABLE not_inbox (id INTEGER PRIMARY KEY, note TEXT)"); err != nil {
		t.Fatal(err)
	}
	open := func(table string) *inbox.Inbox {
		in, err := inbox.New(ctx, db, inbox.Config{Table: table, SkipSchema: true})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	good, err := inbox.New(ctx, db, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := good.CheckTable(ctx); err != nil {
		t.Errorf("CheckTable of an inbox table = %v", err)
	}
	var ce *core.ConfigError
	if err := open("not_inbox").CheckTable(ctx); !errors.As(err, &ce) || ce.Field != "Table" || !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("CheckTable of another table = %v, want a *core.ConfigError of field Table", err)
	}
	if err := open("missing").CheckTable(ctx); err == nil || errors.As(err, &ce) {
		t.Errorf("CheckTable of a missing table = %v, want the read's error", err)
	}
	var nilCtx context.Context // what a caller's unset field holds
	if err := good.CheckTable(nilCtx); !errors.Is(err, core.ErrNilContext) {
		t.Errorf("CheckTable(nil) = %v, want ErrNilContext", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'missing'").Scan(&n); err != nil || n != 0 {
		t.Errorf("CheckTable created the missing table (%d, %v)", n, err)
	}
}
