package sqlite

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	// The SQLite driver, registered as "sqlite3" (cgo).
	_ "github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/core"
)

// DefaultBusyTimeout is how long a SQLite connection opened by
// [Open] waits for a lock before it reports SQLITE_BUSY.
const DefaultBusyTimeout = 10 * time.Second

// sqliteParams are the mattn/go-sqlite3 DSN parameters Open sets:
//
//   - _journal_mode=WAL: readers never block the writer and vice versa.
//   - _busy_timeout: wait for a lock instead of failing at once.
//   - _txlock=immediate: BEGIN IMMEDIATE, so a business transaction takes
//     the write lock when it starts and never fails upgrading a read lock
//     (which the busy timeout cannot cure).
//   - _synchronous=NORMAL: durable across application crashes in WAL mode
//     (a power loss may lose the last commits).
//   - _foreign_keys=1: enforce foreign keys of the business tables.
//   - _stmt_cache_size=64: keep prepared statements per connection, so the
//     same INSERT/UPDATE text is not compiled again for every transaction
//     (about a fifth of a small transaction's cost).
func sqliteParams() url.Values {
	return url.Values{
		"_journal_mode":    {"WAL"},
		"_busy_timeout":    {strconv.FormatInt(DefaultBusyTimeout.Milliseconds(), 10)},
		"_txlock":          {"immediate"},
		"_synchronous":     {"NORMAL"},
		"_foreign_keys":    {"1"},
		"_stmt_cache_size": {"64"},
	}
}

// DSN returns the mattn/go-sqlite3 data source name [Open]
// uses for path: the path with WAL journal, a busy timeout of
// [DefaultBusyTimeout], immediate transactions, synchronous=NORMAL
// and foreign keys on. Use it to open the database with database/sql
// directly.
//
// path is a file name, ":memory:", or a "file:" URI; parameters already in
// the URI win over these defaults. A plain file name must not contain '?'
// (write it as a "file:" URI).
func DSN(path string) (string, error) {
	if path == "" {
		return "", &core.ConfigError{Field: "path", Msg: "must not be empty"}
	}
	if strings.HasPrefix(path, "file:") {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		return path + sep + sqliteParams().Encode(), nil
	}
	if strings.Contains(path, "?") {
		return "", &core.ConfigError{Field: "path", Msg: "a plain file name must not contain '?'; use a file: URI"}
	}
	return path + "?" + sqliteParams().Encode(), nil
}

// Open opens the SQLite database at path (created if missing) with
// the driver "sqlite3" and the settings of [DSN], which let business
// transactions and the store's status writes share one file without
// "database is locked" errors. It does not connect yet: the first query
// opens the file. A relative file name is made absolute first, against
// the working directory of the call: the pool's later connections open
// the same file whatever the directory is then.
//
// An in-memory database (":memory:", a "file::memory:" URI, mode=memory
// or vfs=memdb, without shared cache) or a temporary one ("file:" with an
// empty name) exists per connection, so its pool is limited to one
// connection that is never closed while idle. So is a database opened
// with shared cache ("cache=shared" in a "file:" URI, in memory or on
// disk): SQLite then locks tables within the process, and a connection
// meeting another's lock fails at once with "database table is locked",
// which the busy timeout does not wait for; with one connection the pool
// makes concurrent transactions wait their turn instead. So is a database
// in exclusive locking mode ("_locking_mode=EXCLUSIVE" or
// "_locking=EXCLUSIVE"): its connection never lets go of its locks, and
// in WAL mode no other connection can read or write the file, in this
// process or another. An in-memory or
// temporary database lives and dies with that connection: database/sql
// closes a connection whose transaction's context ended before Commit or
// Rollback (a plain *sql.Tx begun with BeginTx, or one adopted from it),
// and the database, committed events included, goes with it. Use them
// for tests and demos; give anything you keep a file.
func Open(path string) (*sqlx.DB, error) {
	if path != ":memory:" && path != "" && !strings.HasPrefix(path, "file:") && !filepath.IsAbs(path) {
		// Connections are opened later, as the pool needs them: a
		// relative name would be read against the working directory of
		// that moment.
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("outbox: open sqlite %q: %w", path, err)
		}
		path = abs
	}
	dsn, err := DSN(path)
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("outbox: open sqlite %q: %w", path, err)
	}
	if isMemory(path) || sharedCache(path) || exclusiveLocking(path) {
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
	}
	return db, nil
}

// fileURI splits a "file:" URI into its name and query parameters; ok is
// false for a plain file name.
// The name is read as SQLite reads it: without a fragment, its %XX
// escapes decoded (file:%3Amemory%3A is :memory:).
func fileURI(path string) (name string, q url.Values, ok bool) {
	if !strings.HasPrefix(path, "file:") {
		return "", nil, false
	}
	uri, _, _ := strings.Cut(strings.TrimPrefix(path, "file:"), "#")
	name, query, _ := strings.Cut(uri, "?")
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	q, _ = url.ParseQuery(query)
	return name, q, true
}

// param returns the value SQLite takes for a query parameter given
// several times: the last one.
func param(q url.Values, key string) string {
	if v := q[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// exclusiveLocking reports whether path is a "file:" URI asking the
// driver for exclusive locking mode, read as mattn/go-sqlite3 reads it:
// _locking wins over _locking_mode, the first value of each counts.
func exclusiveLocking(path string) bool {
	_, q, ok := fileURI(path)
	if !ok {
		return false
	}
	key := "_locking_mode"
	if _, ok := q["_locking"]; ok {
		key = "_locking"
	}
	return strings.EqualFold(q.Get(key), "exclusive")
}

// sharedCache reports whether path is a "file:" URI asking for shared
// cache.
func sharedCache(path string) bool {
	_, q, ok := fileURI(path)
	return ok && param(q, "cache") == "shared"
}

// isMemory reports whether path names a database of each connection its
// own: in memory (":memory:", mode=memory, the memdb VFS) or a temporary
// file ("file:" with an empty name).
func isMemory(path string) bool {
	if path == ":memory:" {
		return true
	}
	name, q, ok := fileURI(path)
	return ok && param(q, "cache") != "shared" &&
		(name == ":memory:" || name == "" || param(q, "mode") == "memory" || param(q, "vfs") == "memdb")
}
