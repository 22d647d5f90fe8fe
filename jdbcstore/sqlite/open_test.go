package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/sqlitetest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/txctx"
)

// The SQLite helpers shared with jdbcstore's tests.
var (
	openTestStore = sqlitetest.OpenStore
	openRaw       = sqlitetest.OpenRaw
)

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
	if sqlite.Dialect.Classify(err) != jdbcstore.ClassBusy {
		t.Fatalf("second BEGIN: err = %v, want SQLITE_BUSY", err)
	}
}

// With shared cache SQLite locks tables within the process and a writer
// meeting another's lock fails at once ("database table is locked": the
// busy timeout does not apply), so Open gives such a database one
// connection: concurrent transactions wait their turn and none fails. So
// does a database in exclusive locking mode.
func TestSharedCacheAndExclusiveDatabases(t *testing.T) {
	t.Parallel()
	for _, path := range []string{
		"file:" + filepath.Join(t.TempDir(), "shared.db") + "?cache=shared",
		"file:outbox_shared_mem?mode=memory&cache=shared",
		// A connection in exclusive locking mode keeps its locks: in WAL
		// mode no other connection reads or writes the file (every one
		// waited out the busy timeout, then failed "database is locked").
		"file:" + filepath.Join(t.TempDir(), "exclusive.db") + "?_locking_mode=EXCLUSIVE",
		"file:" + filepath.Join(t.TempDir(), "exclusive2.db") + "?_locking=exclusive&_busy_timeout=500",
	} {
		db, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), `CREATE TABLE items (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		m := txctx.NewX(db)
		var wg sync.WaitGroup
		errs := make(chan error, 6*50)
		for w := range 6 {
			wg.Go(func() {
				for i := range 50 {
					errs <- m.Do(t.Context(), func(ctx context.Context) error {
						tx, _ := txctx.From(ctx)
						if _, err := tx.ExecContext(ctx, `SELECT COUNT(*) FROM items`); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, `INSERT INTO items (n) VALUES (?)`, w*100+i)
						return err
					})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("%s: a concurrent transaction failed: %v", path, err)
				break
			}
		}
		var n int
		if err := db.GetContext(t.Context(), &n, `SELECT COUNT(*) FROM items`); err != nil || n != 300 {
			t.Errorf("%s: %d rows (%v), want 300", path, n, err)
		}
		_ = db.Close()
	}
}

func TestInMemoryDatabase(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(":memory:")
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
		got, err := sqlite.DSN(c.path)
		if err != nil || got != c.want {
			t.Errorf("sqlite.DSN(%q) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "app.db?x=1"} {
		if _, err := sqlite.DSN(bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("sqlite.DSN(%q): err = %v, want ErrInvalidConfig", bad, err)
		}
		if _, err := sqlite.Open(bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("sqlite.Open(%q): err = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// Every name of a database each connection has of its own gets a pool of
// one connection: "file:" with an empty name (a temporary database) and
// the memdb VFS got several, and a table created on one connection was
// missing on the next ("no such table").
func TestPrivateDatabasesGetOneConnection(t *testing.T) {
	t.Parallel()
	for _, path := range []string{":memory:", "file::memory:", "file:x?mode=memory", "file:", "file:?mode=rwc", "file:/memy?vfs=memdb",
		// Read as SQLite reads them: escapes decoded, the last of a
		// repeated parameter, no fragment.
		"file:%3Amemory%3A", "file:x.db?mode=rwc&mode=memory", "file:#frag"} {
		db, err := sqlite.Open(path)
		if err != nil {
			t.Fatalf("Open(%q): %v", path, err)
		}
		if got := db.Stats().MaxOpenConnections; got != 1 {
			t.Errorf("Open(%q): MaxOpenConnections = %d, want 1", path, got)
		}
		_ = db.Close()
	}
}

// Exclusive locking mode is read as the driver reads it: _locking wins
// over _locking_mode, the first value of each counts; only that mode gets
// a pool of one connection.
func TestExclusiveLockingReadAsTheDriverReadsIt(t *testing.T) {
	t.Parallel()
	file := "file:" + filepath.Join(t.TempDir(), "x.db")
	for query, one := range map[string]bool{
		"?_locking_mode=EXCLUSIVE":                          true,
		"?_locking=exclusive":                               true,
		"?_locking_mode=EXCLUSIVE&_locking=NORMAL":          false,
		"?_locking_mode=NORMAL":                             false,
		"?_locking_mode=NORMAL&_locking_mode=EXCLUSIVE":     false,
		"?_locking_mode=EXCLUSIVE&_locking_mode=NORMAL":     true,
		"?cache=private&_locking=NORMAL&_locking=EXCLUSIVE": false,
	} {
		db, err := sqlite.Open(file + query)
		if err != nil {
			t.Fatalf("Open(%q): %v", query, err)
		}
		if got := db.Stats().MaxOpenConnections == 1; got != one {
			t.Errorf("Open(%q): a pool of one connection = %v, want %v", query, got, one)
		}
		_ = db.Close()
	}
}

// A *sql.DB of your own with a pool of several connections is warned
// about where the database needs one: in memory (each connection has a
// database of its own, and most publishes failed with "no such table"
// without a word) or in exclusive locking mode (the first connection
// keeps the file locked, and the others failed after the busy timeout
// without a word). A pool of one connection, or a database in normal
// locking mode, is not.
func TestOwnOneConnectionPoolsAreWarnedAbout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dsn, warning string }{
		{":memory:", "in memory"},
		{"file:" + filepath.Join(t.TempDir(), "x.db") + "?_locking_mode=EXCLUSIVE&_journal_mode=WAL&_busy_timeout=100", "exclusive"},
	} {
		logger, logs := testsupport.NewLogger()
		db, err := sqlx.Open("sqlite3", c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		sqlite.Dialect.CheckSetup(t.Context(), db, logger)
		if n := logs.Count("level=WARN", c.warning); n != 1 {
			t.Errorf("%s: want one WARN about the pool:\n%s", c.dsn, logs)
		}
		db.SetMaxOpenConns(1)
		sqlite.Dialect.CheckSetup(t.Context(), db, logger)
		if n := logs.Count("level=WARN", c.warning); n != 1 {
			t.Errorf("%s: a pool of one connection was warned about:\n%s", c.dsn, logs)
		}
	}
	logger, logs := testsupport.NewLogger()
	plain, err := sqlite.Open(filepath.Join(t.TempDir(), "plain.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	sqlite.Dialect.CheckSetup(t.Context(), plain, logger)
	if n := logs.Count("level=WARN"); n != 0 {
		t.Errorf("a database in normal locking mode was warned about:\n%s", logs)
	}
}

// A temporary database ("file:" with an empty name), which sqlite.Open
// supports on one connection, is not warned about for its journal mode:
// it cannot use WAL, and no other connection reads it.
func TestTemporaryDatabaseIsNotWarnedAboutWAL(t *testing.T) {
	t.Parallel()
	logger, logs := testsupport.NewLogger()
	db, err := sqlite.Open("file:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sqlite.Dialect.CheckSetup(t.Context(), db, logger)
	if n := logs.Count("level=WARN"); n != 0 {
		t.Errorf("a temporary database opened with sqlite.Open was warned about:\n%s", logs)
	}
}
