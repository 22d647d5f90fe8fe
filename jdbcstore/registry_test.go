package jdbcstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/inboxrow"
	"github.com/outbox-go/outbox/internal/testsupport/pq"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/mysql"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// fakePQ stands for a driver without a dialect, such as lib/pq.
type fakePQ struct{}

func (fakePQ) Open(string) (driver.Conn, error) { return nil, errors.New("fakepq: no server") }

func init() {
	sql.Register("fakepq", &fakePQ{})
	sql.Register("outbox_test_libpq", &pq.Driver{})
}

// A handle named after a built-in dialect's driver over a well-known
// driver of no dialect (lib/pq named "pgx") is refused: the dialect's
// error classes and notifications need its own driver. A handle without
// a database is a ConfigError of field db, not a panic.
func TestHandleTheDialectCannotServe(t *testing.T) {
	t.Parallel()
	libpq, err := sql.Open("outbox_test_libpq", "") // does not connect
	if err != nil {
		t.Fatal(err)
	}
	defer libpq.Close()
	for _, name := range []string{"pgx", "mysql", "sqlite3"} {
		_, err := jdbcstore.New(sqlx.NewDb(libpq, name), jdbcstore.Config{})
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Dialect" || !errors.Is(err, jdbcstore.ErrUnsupportedDriver) ||
			!strings.Contains(err.Error(), "(*pq.Driver)") {
			t.Errorf("New(lib/pq named %q) = %v; want a ConfigError of Dialect wrapping ErrUnsupportedDriver", name, err)
		}
		if _, err := inboxrow.Open(sqlx.NewDb(libpq, name), inboxrow.Options{Table: "inbox_message"}); !errors.Is(err, jdbcstore.ErrUnsupportedDriver) {
			t.Errorf("inbox store on lib/pq named %q: err = %v", name, err)
		}
	}
	// With the dialect given, the handle is the caller's business.
	if _, err := jdbcstore.New(sqlx.NewDb(libpq, "pgx"), jdbcstore.Config{Dialect: mysql.Dialect}); err != nil {
		t.Errorf("New with an explicit Dialect: %v", err)
	}
	for _, name := range []string{"", "pgx", "mysql", "sqlite3", "fakepq"} {
		_, err := jdbcstore.New(sqlx.NewDb(nil, name), jdbcstore.Config{})
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "db" {
			t.Errorf("New(sqlx.NewDb(nil, %q)) = %v; want a ConfigError of field db", name, err)
		}
		if _, err := inboxrow.Open(sqlx.NewDb(nil, name), inboxrow.Options{Table: "inbox_message"}); !errors.As(err, &ce) || ce.Field != "db" {
			t.Errorf("inbox store on sqlx.NewDb(nil, %q): err = %v", name, err)
		}
	}
}

// A handle of a driver without a dialect is refused by New, the inbox store,
// Lookup and Open with an error naming the driver, its Go type and every
// supported dialect with the package to import.
func TestUnsupportedDriver(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("fakepq", "postgres://u:secret@h/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = jdbcstore.New(db, jdbcstore.Config{})
	if !errors.Is(err, jdbcstore.ErrUnsupportedDriver) {
		t.Fatalf("New: err = %v, want ErrUnsupportedDriver", err)
	}
	want := `no dialect for database/sql driver "fakepq" (*jdbcstore_test.fakePQ); supported: ` +
		"mysql (import github.com/outbox-go/outbox/jdbcstore/mysql), " +
		"pgx (import github.com/outbox-go/outbox/jdbcstore/postgres), " +
		"pgx/v5 (import github.com/outbox-go/outbox/jdbcstore/postgres), " +
		"sqlite3 (import github.com/outbox-go/outbox/jdbcstore/sqlite)"
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
		t.Errorf("New: error %q\nwant it to contain %q", err, want)
	}
	if _, err := inboxrow.Open(db, inboxrow.Options{Table: "inbox_message"}); !errors.Is(err, jdbcstore.ErrUnsupportedDriver) {
		t.Errorf("inbox store: err = %v", err)
	}
	if _, err := jdbcstore.Lookup("postgres"); !errors.Is(err, jdbcstore.ErrUnsupportedDriver) || !strings.Contains(err.Error(), `driver "postgres"`) {
		t.Errorf("Lookup(postgres): err = %v", err)
	}
	if _, err := jdbcstore.Open("postgres", "postgres://h/db"); !errors.Is(err, jdbcstore.ErrUnsupportedDriver) {
		t.Errorf("Open(postgres): err = %v", err)
	}
	// A dialect given explicitly still works on any driver name.
	if _, err := jdbcstore.New(db, jdbcstore.Config{Dialect: mysql.Dialect}); err != nil {
		t.Errorf("New with an explicit Dialect: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]jdbcstore.Dialect{"sqlite3": sqlite.Dialect, "mysql": mysql.Dialect} {
		if d, err := jdbcstore.Lookup(name); err != nil || d != want {
			t.Errorf("Lookup(%q) = %v, %v", name, d, err)
		}
	}
	if names := jdbcstore.Dialects(); !slices.Contains(names, "sqlite3") || !slices.Contains(names, "mysql") || !slices.IsSorted(names) {
		t.Errorf("Dialects() = %v", names)
	}
	// The SQLite dialect opens with its own settings (an Opener).
	db, err := jdbcstore.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var timeout int
	if err := db.QueryRowContext(context.Background(), "PRAGMA busy_timeout").Scan(&timeout); err != nil || timeout == 0 {
		t.Errorf("busy_timeout = %d, %v; want sqlite.Open's settings", timeout, err)
	}
	// Registering a second dialect for a driver name panics.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Register of a second dialect for sqlite3 did not panic")
			}
		}()
		jdbcstore.Register(otherDialect{sqlite.Dialect})
	}()
	jdbcstore.Register(sqlite.Dialect) // the same dialect again is harmless
}

// otherDialect is a distinct dialect claiming sqlite.Dialect's driver names.
type otherDialect struct{ jdbcstore.Dialect }

func TestErrorClassString(t *testing.T) {
	t.Parallel()
	for c, want := range map[jdbcstore.ErrorClass]string{jdbcstore.ClassOther: "other", jdbcstore.ClassDuplicate: "duplicate", jdbcstore.ClassBusy: "busy", 9: "ErrorClass(9)"} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(c), got, want)
		}
	}
}

// uncomparableDialect is a dialect whose type cannot be compared with ==
// (a slice field).
type uncomparableDialect struct {
	jdbcstore.Dialect
	names []string
}

func (d uncomparableDialect) DriverNames() []string { return d.names }

// uncomparableRuns numbers the runs of TestRegisterRefusesUncomparableDialect.
var uncomparableRuns atomic.Int64

// A dialect whose type cannot be compared is refused by Register with a
// message that says so, not with a runtime error from comparing it with
// the dialect already registered (even for the same value twice).
func TestRegisterRefusesUncomparableDialect(t *testing.T) {
	t.Parallel()
	// The registry is global and keeps &d: each run (-count) registers a
	// driver name of its own.
	name := fmt.Sprintf("uncomparable_test_%d", uncomparableRuns.Add(1))
	d := uncomparableDialect{Dialect: sqlite.Dialect, names: []string{name}}
	for range 2 {
		func() {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, "not comparable") || !strings.Contains(msg, "pointer") {
					t.Errorf("Register of an uncomparable dialect: panic %v, want one saying it is not comparable (register a pointer)", r)
				}
			}()
			jdbcstore.Register(d)
		}()
	}
	if _, err := jdbcstore.Lookup(name); err == nil {
		t.Error("the refused dialect was registered")
	}
	jdbcstore.Register(&d) // a pointer to it is fine
}

// cannotClaim is a dialect with neither SKIP LOCKED nor RETURNING.
type cannotClaim struct{ jdbcstore.Dialect }

func (cannotClaim) Name() string { return "cannotclaim" }

func (d cannotClaim) Capabilities() jdbcstore.Capabilities {
	c := d.Dialect.Capabilities()
	c.SkipLocked, c.Returning = false, false
	return c
}

// A dialect that can claim no row (neither SkipLocked nor Returning) is
// refused by New, for the outbox and the inbox store, instead of failing
// every claim later.
func TestNewRefusesDialectThatCannotClaim(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = jdbcstore.New(db, jdbcstore.Config{Dialect: cannotClaim{sqlite.Dialect}})
	var ce *core.ConfigError
	if !errors.Is(err, core.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "Dialect" ||
		!strings.Contains(err.Error(), "SKIP LOCKED") {
		t.Errorf("New = %v, want a ConfigError of field Dialect naming SKIP LOCKED and RETURNING", err)
	}
	if _, err := inboxrow.Open(db, inboxrow.Options{Table: "inbox_message", Dialect: cannotClaim{sqlite.Dialect}}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("inbox store: err = %v, want ErrInvalidConfig", err)
	}
}

// pointerDialect is a dialect registered, or configured, as a pointer.
type pointerDialect struct{ jdbcstore.Dialect }

func (*pointerDialect) Name() string          { return "pointer" }
func (*pointerDialect) DriverNames() []string { return []string{"pointer_test"} }

// A nil pointer of a dialect type is refused as a nil dialect is: Register
// panics saying so (it used to register it, and every use then failed),
// and New and the inbox store report a ConfigError of field Dialect (New
// used to panic on it).
func TestNilPointerDialectRefused(t *testing.T) {
	t.Parallel()
	var d *pointerDialect
	func() {
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "nil Dialect") || !strings.Contains(msg, "*jdbcstore_test.pointerDialect") {
				t.Errorf("Register of a nil *pointerDialect: panic %q, want one naming a nil Dialect and its type", msg)
			}
		}()
		jdbcstore.Register(d)
	}()
	if _, err := jdbcstore.Lookup("pointer_test"); err == nil {
		t.Error("the nil dialect was registered")
	}
	db, err := sqlx.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = jdbcstore.New(db, jdbcstore.Config{Dialect: d})
	var ce *core.ConfigError
	if !errors.Is(err, core.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "Dialect" || !strings.Contains(err.Error(), "nil *jdbcstore_test.pointerDialect") {
		t.Errorf("New with a nil *pointerDialect = %v, want a ConfigError of field Dialect naming it", err)
	}
	if _, err := inboxrow.Open(db, inboxrow.Options{Table: "inbox_message", Dialect: d}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("inbox store: err = %v, want ErrInvalidConfig", err)
	}
}

// A dialect with an empty driver name is refused by Register, as one
// without any (it registered it: Lookup("") found it).
func TestRegisterRefusesAnEmptyDriverName(t *testing.T) {
	d := &uncomparableDialect{Dialect: sqlite.Dialect, names: []string{"empty_name_test", ""}}
	func() {
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "empty driver name") {
				t.Errorf("Register with an empty driver name: panic %q, want one naming the empty driver name", msg)
			}
		}()
		jdbcstore.Register(d)
	}()
	if _, err := jdbcstore.Lookup(""); err == nil {
		t.Error(`Lookup("") found a dialect`)
	}
	if _, err := jdbcstore.Lookup("empty_name_test"); err == nil {
		t.Error("the refused dialect was registered under its other name")
	}
}
