package main

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
)

// The walkthrough runs on MySQL/MariaDB (a fresh database, see
// internal/testdb), twice in a row: it recreates its own tables.
func TestDemoRunsOnMySQL(t *testing.T) {
	testDemoOnServer(t, mysqlServer, testdb.MySQLConfig(t).FormatDSN())
}

// The walkthrough runs on PostgreSQL (a fresh schema as the DSN's
// search_path), twice in a row.
func TestDemoRunsOnPostgreSQL(t *testing.T) {
	testDemoOnServer(t, postgresServer, testdb.PostgresSchemaDSN(t))
}

// testDemoOnServer runs the walkthrough on dsn of srv twice and checks its
// output.
func testDemoOnServer(t *testing.T, srv server, dsn string) {
	t.Helper()
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var out bytes.Buffer
		err := runServer(ctx, &out, srv, dsn, false)
		cancel()
		if err != nil {
			t.Fatalf("run %d: demo failed: %v\n%s", run, err, out.String())
		}
		for _, want := range []string{"outbox demo on " + srv.name, "1. Commit", "the listener was called", "coalesced batches", "3. Overflow", "status DEAD  attempts 3",
			"DONE   1      9", "the email was sent 1 time", "DEAD   3      1", "NEW    0      0", "RETRY  2      0"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("run %d: demo output lacks %q:\n%s", run, want, out.String())
			}
		}
	}
}

// On PostgreSQL the demo drops its tables in the schema it creates them
// in (the first existing schema of the search path), never a same-named
// table of a later schema: it dropped a second schema's orders_demo.
func TestDemoKeepsOtherSchemasTablesPostgreSQL(t *testing.T) {
	first, second := testdb.PostgresSchemaDSN(t), testdb.PostgresSchemaDSN(t)
	schemaOf := func(dsn string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return u.Query().Get("search_path")
	}
	other := testdb.OpenPostgres(t, second)
	if _, err := other.Exec(`CREATE TABLE "` + serverOrdersTable + `" (item TEXT); INSERT INTO "` + serverOrdersTable + `" VALUES ('keep me')`); err != nil {
		t.Fatal(err)
	}
	dsn := testdb.WithPostgresParam(t, first, "search_path", schemaOf(first)+","+schemaOf(second))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := runServer(ctx, &out, postgresServer, dsn, false); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	var item string
	if err := other.Get(&item, `SELECT item FROM "`+serverOrdersTable+`"`); err != nil || item != "keep me" {
		t.Fatalf("the other schema's %s: %q, %v", serverOrdersTable, item, err)
	}
}
