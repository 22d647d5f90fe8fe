package jdbcstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Table names: a plain identifier of at most 48 characters, not one SQLite
// reserves (sqlite_… in any case, or sqlite, whose indexes would be), on
// every database. SQLite's reserved names passed and failed only at
// ApplySchema, with the driver's error.
func TestValidateTableName(t *testing.T) {
	for name, ok := range map[string]bool{
		"outbox_event":          true,
		"_x":                    true,
		strings.Repeat("a", 48): true,
		strings.Repeat("a", 49): false,
		"":                      false,
		"9x":                    false,
		"x-y":                   false,
		"sqlite_events":         false,
		"SQLITE_x":              false,
		"SQLite":                false,
		"sqlite":                false,
		"sqlitex":               true,
		"my_sqlite_events":      true,
	} {
		err := jdbcstore.ValidateTableName(name)
		if ok != (err == nil) {
			t.Errorf("ValidateTableName(%q) = %v, want ok %v", name, err, ok)
		}
		var ce *core.ConfigError
		if err != nil && (!errors.As(err, &ce) || ce.Field != "Table" || !errors.Is(err, core.ErrInvalidIdentifier) || !errors.Is(err, core.ErrInvalidConfig)) {
			t.Errorf("ValidateTableName(%q) = %v, want a *core.ConfigError of field Table wrapping ErrInvalidIdentifier", name, err)
		}
	}
	// New refuses it before anything is written.
	db, err := sqlite.Open(t.TempDir() + "/t.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := jdbcstore.New(db, jdbcstore.Config{Table: "sqlite_events"}); !errors.Is(err, core.ErrInvalidIdentifier) {
		t.Errorf("New with a table SQLite reserves = %v, want ErrInvalidIdentifier", err)
	}
}
