package scratchdb

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/internal/testdb"
)

func TestPostgresWithDatabase(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u@h:5432/test?sslmode=disable": "postgres://u@h:5432/x_1?sslmode=disable",
		"postgresql://u@h/":                        "postgresql://u@h/x_1",
		"host=h user=u dbname=test":                "host=h user=u dbname=test dbname=x_1",
	} {
		if got, err := postgresWithDatabase(dsn, "x_1"); err != nil || got != want {
			t.Errorf("postgresWithDatabase(%q) = %q, %v; want %q", dsn, got, err, want)
		}
	}
}

// A scratch database exists until drop(true) and is gone after it, even
// with a session still open on it.
func TestPostgres(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	ctx := context.Background()
	newDSN, name, drop, err := Postgres(ctx, dsn, "outbox_scratch_")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", newDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var cur string
	if err := db.QueryRowContext(ctx, "SELECT current_database()").Scan(&cur); err != nil || cur != name || !strings.HasPrefix(name, "outbox_scratch_") {
		t.Fatalf("current_database() = %q, %v; want %q", cur, err, name)
	}
	if err := drop(true); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Errorf("database %s: %d rows, %v; want dropped", name, n, err)
	}
}
