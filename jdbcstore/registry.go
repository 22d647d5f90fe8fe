package jdbcstore

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/internal/sqldriver"
)

// ErrUnsupportedDriver is wrapped by the error of [New] (and of inbox.New),
// [Lookup] and [Open] when no registered [Dialect] serves the
// database/sql driver of the handle. The message names the supported
// dialects and the package to import for each.
var ErrUnsupportedDriver = errors.New("outbox: jdbcstore: unsupported database driver")

// builtinPackages are the dialect packages of this module by driver name,
// named in the error for an unsupported driver even when the program
// imports none of them.
var builtinPackages = map[string]string{
	"mysql":   "github.com/outbox-go/outbox/jdbcstore/mysql",
	"pgx":     "github.com/outbox-go/outbox/jdbcstore/postgres",
	"pgx/v5":  "github.com/outbox-go/outbox/jdbcstore/postgres",
	"sqlite3": "github.com/outbox-go/outbox/jdbcstore/sqlite",
}

// The driver detection of a *sql.DB (which does not keep its driver's
// name) prefers a name with a dialect when a driver is registered under
// several.
func init() { sqldriver.SetKnown(func(name string) bool { return dialectForDriver(name) != nil }) }

// registry holds the registered dialects by database/sql driver name.
var registry struct {
	mu      sync.RWMutex
	byName  map[string]Dialect
	pkgPath map[string]string
}

// Register makes d the dialect detected for each of its
// [Dialect.DriverNames]. Per-database packages call it from their init
// function, so importing the package (even as _) is enough:
//
//	import _ "github.com/outbox-go/outbox/jdbcstore/mysql"
//
// Register panics if d is nil (or a nil pointer), has no driver name or an
// empty one, is of a type that
// cannot be compared with == (a struct holding a slice or a map: register
// a pointer to it), or one of its driver names is already registered for
// another dialect (as database/sql's Register does for drivers).
func Register(d Dialect) {
	if d == nil {
		panic("outbox: jdbcstore: Register of a nil Dialect")
	}
	if nilval.Is(d) {
		// Its methods would fail on every use, long after init.
		panic(fmt.Sprintf("outbox: jdbcstore: Register of a nil Dialect (a nil %T)", d))
	}
	if t := reflect.TypeOf(d); !t.Comparable() {
		panic(fmt.Sprintf("outbox: jdbcstore: Register of dialect %s: its type %v is not comparable (==); register a pointer to it", d.Name(), t))
	}
	names := d.DriverNames()
	if len(names) == 0 {
		panic("outbox: jdbcstore: Register of dialect " + d.Name() + " without driver names")
	}
	if slices.Contains(names, "") {
		panic("outbox: jdbcstore: Register of dialect " + d.Name() + " with an empty driver name")
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.byName == nil {
		registry.byName = make(map[string]Dialect)
	}
	for _, n := range names {
		if old, ok := registry.byName[n]; ok && old != d {
			panic(fmt.Sprintf("outbox: jdbcstore: Register called twice for driver %q (dialects %s and %s)", n, old.Name(), d.Name()))
		}
	}
	for _, n := range names {
		registry.byName[n] = d
	}
}

// Dialects returns the database/sql driver names that have a registered
// dialect, sorted.
func Dialects() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	names := make([]string, 0, len(registry.byName))
	for n := range registry.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns the dialect registered for a database/sql driver name.
// The error wraps [ErrUnsupportedDriver] and names the supported
// dialects with the package to import for each.
func Lookup(driverName string) (Dialect, error) {
	if d := dialectForDriver(driverName); d != nil {
		return d, nil
	}
	return nil, unsupported(driverName, nil)
}

// Open opens a database with the registered dialect of driverName: the
// dialect's own Open when it implements [Opener] (SQLite's connection
// settings), sqlx.Open otherwise. It does not connect yet. A driver
// without a registered dialect gives an error wrapping
// [ErrUnsupportedDriver].
func Open(driverName, dsn string) (*sqlx.DB, error) {
	d, err := Lookup(driverName)
	if err != nil {
		return nil, err
	}
	if o, ok := d.(Opener); ok {
		return o.Open(dsn)
	}
	return sqlx.Open(driverName, dsn)
}

// dialectForDriver returns the dialect registered for a database/sql
// driver name, or nil.
func dialectForDriver(driverName string) Dialect {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return registry.byName[driverName]
}

// unsupported returns the error for a driver without a dialect: it names
// the driver (and its Go type when known) and every supported dialect with
// the package that registers it.
func unsupported(driverName string, drv driver.Driver) error {
	supported := make(map[string]string, len(builtinPackages))
	for n, p := range builtinPackages {
		supported[n] = "import " + p
	}
	for _, n := range Dialects() {
		if _, ok := supported[n]; !ok {
			supported[n] = "dialect " + dialectForDriver(n).Name()
		}
	}
	names := make([]string, 0, len(supported))
	for n := range supported {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n + " (" + supported[n] + ")")
	}
	what := strconv.Quote(driverName)
	if drv != nil {
		what += fmt.Sprintf(" (%T)", drv)
	}
	return fmt.Errorf("%w: no dialect for database/sql driver %s; supported: %s", ErrUnsupportedDriver, what, b.String())
}

func itoa(n int) string { return strconv.Itoa(n) }
