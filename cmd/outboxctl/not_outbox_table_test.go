package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A --table naming a table that is no outbox table (one of the
// application's, named by mistake): the commands reading it say so, not
// that 'schema apply' would upgrade it, which it refuses to; on every
// database.
func TestNotAnOutboxTable(t *testing.T) {
	dbs := map[string]func(t *testing.T) (dsn string, db *sqlx.DB){
		"sqlite": func(t *testing.T) (string, *sqlx.DB) {
			path := filepath.Join(t.TempDir(), "app.db")
			db, err := sqlite.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return path, db
		},
		"mysql": func(t *testing.T) (string, *sqlx.DB) {
			cfg := testdb.MySQLConfig(t)
			return cfg.FormatDSN(), testdb.OpenMySQL(t, cfg)
		},
		"postgres": func(t *testing.T) (string, *sqlx.DB) {
			dsn := testdb.PostgresSchemaDSN(t)
			return dsn, testdb.OpenPostgres(t, dsn)
		},
	}
	for name, open := range dbs {
		t.Run(name, func(t *testing.T) {
			dsn, db := open(t)
			// Not an outbox table, though it has some of its columns.
			if _, err := db.Exec(`CREATE TABLE orders (event_id VARCHAR(64) PRIMARY KEY, status INTEGER NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			base := []string{"--dsn", dsn, "--table", "orders"}
			for _, cmd := range [][]string{{"stats"}, {"dead", "list"}, {"purge", "--done-older-than", "7d"}, {"dead", "replay", "--all"}} {
				line := fails(t, exitFailed, append(base, cmd...)...)
				if strings.Contains(line, "earlier release") || strings.Contains(line, "upgrades orders") ||
					!strings.Contains(line, "orders is not an outbox table") {
					t.Errorf("%s on a table that is no outbox table: %q", cmd, line)
				}
			}
			line := fails(t, exitFailed, append(base, "schema", "apply")...)
			if !strings.Contains(line, "not an outbox table") {
				t.Errorf("schema apply on a table that is no outbox table: %q", line)
			}
		})
	}
}
