package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
)

// --query-timeout on MariaDB/MySQL: with the outbox table write-locked by
// another session (LOCK TABLES, a migration's), each page answers 504 at
// the bound, well before the lock is released, and the pages answer again
// once it is (their reads' slots were freed).
func TestServeQueryTimeoutMySQL(t *testing.T) {
	cfg := testdb.MySQLConfig(t)
	dsn := cfg.FormatDSN()
	ok(t, "--dsn", dsn, "schema", "apply")
	base := startServe(t, "--dsn", dsn, "serve", "--query-timeout", "1s")
	db := testdb.OpenMySQL(t, cfg)
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "LOCK TABLES "+jdbcstore.DefaultTable+" WRITE"); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"dead", "types", "purge?done=7d&dead=30d", "event?id=no-such-id", "replay?id=no-such-id"} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+page, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s with the table locked: %v", page, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("GET %s took %v with a query timeout of 1s", page, took)
		}
		if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "not done within the query timeout (1s)") {
			t.Errorf("GET %s with the table locked = %d after %v, want 504\n%s", page, res.StatusCode, time.Since(start), mainOf(string(b)))
		}
	}
	if _, err := conn.ExecContext(t.Context(), "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	if code, body := getPage(t, base+"dead"); code != http.StatusOK {
		t.Errorf("GET dead once the lock is released = %d\n%s", code, body)
	}
}

func mainOf(page string) string {
	if i := strings.Index(page, "<main>"); i >= 0 {
		page = page[i:]
	}
	return page
}
