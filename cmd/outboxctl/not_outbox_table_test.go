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
// database. purge deletes nothing from it (with the columns its
// statements name, it deleted every row of status 1 and an old done_at).
func TestNotAnOutboxTable(t *testing.T) {
	finished := map[string]string{ // a column type and a finish time of long ago
		"sqlite": "INTEGER", "mysql": "DATETIME(6)", "postgres": "TIMESTAMPTZ",
	}
	long := map[string]string{"sqlite": "0", "mysql": "'2000-01-01'", "postgres": "'2000-01-01'"}
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
			if _, err := db.Exec(`CREATE TABLE orders (event_id VARCHAR(64) PRIMARY KEY, status INTEGER NOT NULL, done_at ` +
				finished[name] + `, created_at ` + finished[name] + `)`); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"o1", "o2", "o3"} {
				if _, err := db.Exec(`INSERT INTO orders VALUES ('` + id + `', 1, ` + long[name] + `, ` + long[name] + `)`); err != nil {
					t.Fatal(err)
				}
			}
			base := []string{"--dsn", dsn, "--table", "orders"}
			for _, cmd := range [][]string{{"stats"}, {"dead", "list"}, {"purge", "--done-older-than", "7d"}, {"dead", "replay", "--all"}} {
				line := fails(t, exitFailed, append(base, cmd...)...)
				if strings.Contains(line, "earlier release") || strings.Contains(line, "upgrades orders") ||
					!strings.Contains(line, "orders is not an outbox table") && !strings.Contains(line, `"orders", which is not an outbox table`) {
					t.Errorf("%s on a table that is no outbox table: %q", cmd, line)
				}
			}
			var n int
			if err := db.Get(&n, `SELECT COUNT(*) FROM orders`); err != nil || n != 3 {
				t.Errorf("orders holds %d rows (%v) after the commands, want 3", n, err)
			}
			line := fails(t, exitFailed, append(base, "schema", "apply")...)
			if !strings.Contains(line, "not an outbox table") {
				t.Errorf("schema apply on a table that is no outbox table: %q", line)
			}
		})
	}
}
