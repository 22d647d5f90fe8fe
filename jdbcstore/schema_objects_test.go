package jdbcstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// An outbox table renamed away (archived) keeps its indexes and
// triggers, whose names SQLite and PostgreSQL hold per schema: a new
// table of the old name then got none of them (CREATE … IF NOT EXISTS
// did nothing), and on SQLite every claim, which names the pending index,
// failed. ApplySchema refuses it, naming the index and the table holding
// it; MySQL/MariaDB, whose index names are per table, create the new
// table's own.
func TestApplySchemaAfterTheTableWasRenamed(t *testing.T) {
	for name, open := range orderedStores {
		t.Run(name, func(t *testing.T) {
			st, db := open(t)
			if _, err := db.Exec("ALTER TABLE " + st.Dialect().QuoteIdent(st.Table()) + " RENAME TO outbox_archive"); err != nil {
				t.Fatal(err)
			}
			again, err := jdbcstore.New(db, jdbcstore.Config{Dialect: st.Dialect()})
			if err != nil {
				t.Fatal(err)
			}
			err = again.ApplySchema(t.Context())
			if name == "mysql" {
				if err != nil {
					t.Fatalf("ApplySchema after the rename: %v", err)
				}
				return
			}
			var ce *core.ConfigError
			if !errors.As(err, &ce) || ce.Field != "Table" || !strings.Contains(err.Error(), `belongs to the table "outbox_archive"`) {
				t.Fatalf("ApplySchema after the rename = %v, want a *core.ConfigError of field Table naming outbox_archive", err)
			}
		})
	}
}

// A table of the application's whose name is the outbox table's keys
// table ("<table>_keys") is refused, not altered (MySQL/MariaDB added the
// id columns to it) nor used (every ordered publish then failed).
func TestApplySchemaRefusesAForeignKeysTable(t *testing.T) {
	for name, open := range orderedStores {
		if name == "sqlite" {
			continue // no keys table
		}
		t.Run(name, func(t *testing.T) {
			def, db := open(t)
			st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: def.Dialect(), Table: "shop"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("CREATE TABLE shop_keys (id INT PRIMARY KEY, label VARCHAR(20))"); err != nil {
				t.Fatal(err)
			}
			var ce *core.ConfigError
			if err := st.ApplySchema(t.Context()); !errors.As(err, &ce) || ce.Field != "Table" || !strings.Contains(err.Error(), `"shop_keys"`) {
				t.Fatalf("ApplySchema with a foreign shop_keys = %v, want a *core.ConfigError of field Table naming shop_keys", err)
			}
			var cols int
			if err := db.Get(&cols, "SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'shop_keys' AND table_schema = "+currentSchema(name)); err != nil {
				t.Fatal(err)
			}
			if cols != 2 {
				t.Errorf("shop_keys has %d columns after ApplySchema, want its own 2", cols)
			}
		})
	}
}

// currentSchema is the SQL of the current schema (database) of the
// named database's connection.
func currentSchema(name string) string {
	if name == "mysql" {
		return "DATABASE()"
	}
	return "current_schema()"
}
