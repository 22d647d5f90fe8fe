package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/mysql"
	"github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// dialects are the values of schema print --dialect.
var dialects = map[string]jdbcstore.Dialect{"sqlite": sqlite.Dialect, "mysql": mysql.Dialect, "postgres": postgres.Dialect}

func schemaPrintCommand() *command {
	return &command{
		name:    "print",
		summary: "print the DDL of the outbox table",
		help: `Prints the DDL that 'schema apply' runs (CREATE TABLE/INDEX IF NOT EXISTS) for the
--table name, for a migration tool or a DBA. The dialect comes from --dialect, or
else from the form of --dsn (a MySQL DSN, a PostgreSQL URL or a SQLite path), or else is sqlite (with
a note on stderr); nothing connects to the database.

--json prints one object: dialect, table and sql.`,
		define: func(fs *flag.FlagSet) action {
			var dialect string
			fs.StringVar(&dialect, "dialect", "", "sqlite, mysql or postgres (default: the dialect of --dsn, else sqlite)")
			return func(_ context.Context, s *session, _ []string) error {
				d, err := printDialect(dialect, s.g.dsn.raw)
				if err != nil {
					return err
				}
				if err := jdbcstore.ValidateTableName(s.g.table); err != nil {
					return usagef("--table: %v", err)
				}
				// New renders the DDL without touching the database; this
				// pool is never used.
				db, err := sqlx.Open("sqlite3", ":memory:")
				if err != nil {
					return err
				}
				defer db.Close()
				store, err := jdbcstore.New(db, jdbcstore.Config{Dialect: d, Table: s.g.table})
				if err != nil {
					return usagef("%v", err)
				}
				if s.g.json {
					err = writeJSON(s.stdout, schemaJSON{Dialect: d.Name(), Table: store.Table(), SQL: store.SchemaSQL()})
				} else {
					_, err = fmt.Fprintln(s.stdout, strings.TrimRight(store.SchemaSQL(), "\n"))
				}
				if err == nil && dialect == "" && s.g.dsn.raw == "" {
					// Only once printed: a failure is one line on stderr.
					fmt.Fprintf(s.stderr, "%s: schema print: no --dialect or --dsn: printed the sqlite schema (--dialect mysql for MySQL/MariaDB, postgres for PostgreSQL)\n", progName)
				}
				return err
			}
		},
	}
}

// printDialect picks the dialect of schema print: --dialect, else the
// form of --dsn, else SQLite; both must agree when both are given.
func printDialect(flagValue, dsn string) (jdbcstore.Dialect, error) {
	var fromDSN jdbcstore.Dialect
	if err := unsupportedDSN(dsn); err != nil {
		return nil, err
	}
	if dsn != "" {
		fromDSN = sqlite.Dialect
		if looksMySQL(dsn) {
			fromDSN = mysql.Dialect
		}
		if looksPostgres(dsn) {
			fromDSN = postgres.Dialect
		}
	}
	if flagValue == "" {
		if fromDSN == nil {
			return sqlite.Dialect, nil
		}
		return fromDSN, nil
	}
	d, ok := dialects[strings.ToLower(flagValue)]
	if !ok {
		return nil, usagef("--dialect must be sqlite, mysql or postgres, got %q", flagValue)
	}
	if fromDSN != nil && fromDSN != d {
		return nil, usagef("--dialect %s contradicts --dsn, which is %s", d.Name(), fromDSN.Name())
	}
	return d, nil
}

type schemaJSON struct {
	Dialect  string `json:"dialect"`
	Database string `json:"database,omitempty"`
	Table    string `json:"table"`
	SQL      string `json:"sql,omitempty"`
	Applied  bool   `json:"applied,omitempty"`
}

func schemaApplyCommand() *command {
	return &command{
		name:    "apply",
		summary: "create the outbox table and its indexes if missing; upgrade one of an earlier release",
		help: `Runs the store's DDL (see 'schema print') on the database: creates the --table, its
indexes and its keys table when missing. An existing table keeps its rows; one created
by an earlier release, without the ordering columns, is upgraded in place (ALTER TABLE
... ADD COLUMN, as README "Ordered delivery" shows; jdbcstore ApplySchema), which
'schema print' does not show. Safe to run again. This is the only command that creates
a SQLite file that does not exist.

--json prints one object: dialect, database (password masked), table and applied.`,
		define: func(*flag.FlagSet) action {
			return func(ctx context.Context, s *session, _ []string) error {
				store, err := s.open(ctx, true)
				if err != nil {
					return err
				}
				if err := store.ApplySchema(ctx); err != nil {
					return err
				}
				if s.g.json {
					return writeJSON(s.stdout, schemaJSON{
						Dialect: store.Dialect().Name(), Database: s.target.shown, Table: store.Table(), Applied: true,
					})
				}
				_, err = fmt.Fprintf(s.stdout, "schema applied: table %s on %s %s (created if missing; an existing table keeps its rows, upgraded if of an earlier release)\n",
					store.Table(), store.Dialect().Name(), cell(s.target.shown))
				return err
			}
		},
	}
}
