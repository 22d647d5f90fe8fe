package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

const testOwner = "sqlite-test-owner"

var testLease = core.Lease{Owner: testOwner, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}

// openTestStore returns a store on a new database file opened with Open,
// with the schema applied, and the file's path.
func openTestStore(t *testing.T, cfg jdbcstore.Config) (*jdbcstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, path
}

// openRaw opens path with the "sqlite3" driver and exactly the given DSN
// parameters (no Open defaults).
func openRaw(t *testing.T, path, params string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("sqlite3", path+"?"+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func mustEnv(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func markDone(ctx context.Context, st *jdbcstore.Store, id string) (bool, error) {
	n, err := st.MarkDone(ctx, testOwner, []string{id})
	return n == 1, err
}

func TestOpenSettings(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, jdbcstore.Config{})
	ctx := t.Context()
	conn, err := st.DB().Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checks := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"busy_timeout", "10000"},
		{"synchronous", "1"}, // NORMAL
		{"foreign_keys", "1"},
	}
	for _, c := range checks {
		var got string
		if err := conn.QueryRowxContext(ctx, "PRAGMA "+c.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", c.pragma, err)
		}
		if !strings.EqualFold(got, c.want) {
			t.Errorf("PRAGMA %s = %q, want %q", c.pragma, got, c.want)
		}
	}
}

// A transaction begun on an Open pool holds the write lock from
// BEGIN (BEGIN IMMEDIATE): a second writer cannot start.
func TestOpenImmediateTransactions(t *testing.T) {
	t.Parallel()
	st, path := openTestStore(t, jdbcstore.Config{})
	ctx := t.Context()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()

	other := openRaw(t, path, "_busy_timeout=0&_txlock=immediate")
	tx2, err := other.BeginTxx(ctx, nil)
	if err == nil {
		_ = tx2.Rollback()
		t.Fatal("second BEGIN IMMEDIATE succeeded while the first transaction is open")
	}
	if Dialect.Classify(err) != jdbcstore.ClassBusy {
		t.Fatalf("second BEGIN: err = %v, want SQLITE_BUSY", err)
	}
}

func TestInMemoryDatabase(t *testing.T) {
	t.Parallel()
	db, err := Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatal(err)
	}
	env := mustEnv(t, core.NewEvent("Mem").PayloadJSONString(`{}`))
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(ctx, tx, env, testLease); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if ok, err := markDone(ctx, st, env.ID()); err != nil || !ok {
		t.Fatalf("MarkDone = %v, %v", ok, err)
	}
}

func TestDSN(t *testing.T) {
	t.Parallel()
	const params = "_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_stmt_cache_size=64&_synchronous=NORMAL&_txlock=immediate"
	cases := []struct {
		path, want string
	}{
		{"app.db", "app.db?" + params},
		{"/var/lib/app/app.db", "/var/lib/app/app.db?" + params},
		{":memory:", ":memory:?" + params},
		{"file:app.db", "file:app.db?" + params},
		{"file:app.db?mode=rwc", "file:app.db?mode=rwc&" + params},
	}
	for _, c := range cases {
		got, err := DSN(c.path)
		if err != nil || got != c.want {
			t.Errorf("DSN(%q) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "app.db?x=1"} {
		if _, err := DSN(bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("DSN(%q): err = %v, want ErrInvalidConfig", bad, err)
		}
		if _, err := Open(bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("Open(%q): err = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestIsSQLiteMemory(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		":memory:":                          true,
		"file::memory:":                     true,
		"file:x?mode=memory":                true,
		"file::memory:?cache=shared":        false,
		"file:x?mode=memory&cache=shared":   false,
		"app.db":                            false,
		"file:app.db":                       false,
		"file:app.db?mode=rwc&_txlock=none": false,
	}
	for path, want := range cases {
		if got := isMemory(path); got != want {
			t.Errorf("isMemory(%q) = %v, want %v", path, got, want)
		}
	}
}
