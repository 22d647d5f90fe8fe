package main

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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
	conn := lockOutboxTable(t, cfg)
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

// An interrupt while a page waits for a lock (the outbox table
// write-locked by another session, --query-timeout 30s) cuts the page
// once the graceful stop's 5s ran out: its query is canceled, the page
// ends, and serve fails saying it cut 1 request. It said "serve: stopping:
// context deadline exceeded (the --timeout of 10s ran out)" and left the
// page waiting.
func TestServeInterruptWhileAPageWaitsMySQL(t *testing.T) {
	cfg := testdb.MySQLConfig(t)
	dsn := cfg.FormatDSN()
	ok(t, "--dsn", dsn, "schema", "apply")
	s := launchServe(t, "127.0.0.1:0", "--dsn", dsn, "serve")
	db := testdb.OpenMySQL(t, cfg)
	conn := lockOutboxTable(t, cfg)
	answered := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"dead", nil)
		if err == nil {
			var res *http.Response
			if res, err = http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}
		answered <- err
	}()
	// The page is under way once its query waits for the lock.
	waiting := func() bool {
		var n int
		err := db.GetContext(t.Context(), &n, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND STATE LIKE 'Waiting for table%'", cfg.DBName)
		return err == nil && n > 0
	}
	for deadline := time.Now().Add(30 * time.Second); !waiting(); {
		if time.Now().After(deadline) {
			t.Fatal("the page's query never waited for the lock")
		}
		select {
		case err := <-answered:
			t.Fatalf("the page answered with the table locked: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	start := time.Now()
	code, stderr := s.stop(t)
	took := time.Since(start)
	want := "outboxctl: serve: stopping: the graceful stop's 5s ran out with 1 request still under way: cut (a page's database work may take up to --query-timeout, 30s)\n"
	// Before it, the dashboard logs the page that failed (context canceled).
	if last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]; code != exitFailed || last != want {
		t.Errorf("interrupted with a page waiting: exit %d after %v, stderr %q\nwant exit %d, its last line %q", code, took, stderr, exitFailed, want)
	}
	select {
	case <-answered:
		if took > 20*time.Second {
			t.Errorf("serve stopped %v after the interrupt", took)
		}
	case <-time.After(20 * time.Second):
		t.Error("the page cut still waits for the lock")
	}
	if _, err := conn.ExecContext(t.Context(), "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
}

// lockOutboxTable locks the outbox table of the database of cfg for
// writing (LOCK TABLES, as a migration would) on a connection of its own,
// which it returns (UNLOCK TABLES on it ends the lock; it is closed at
// the test's end).
func lockOutboxTable(t *testing.T, cfg *mysql.Config) *sql.Conn {
	t.Helper()
	conn, err := testdb.OpenMySQL(t, cfg).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(t.Context(), "LOCK TABLES "+jdbcstore.DefaultTable+" WRITE"); err != nil {
		t.Fatal(err)
	}
	return conn
}
