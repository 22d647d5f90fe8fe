// Package sqldriver names the database/sql driver of a *sql.DB the way
// sqlx and the dialect detection know it.
package sqldriver

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
)

// Name maps well-known database/sql drivers to their sqlx names ("sqlite3",
// "mysql", "postgres", "pgx", "sqlite"), so that sqlx binds parameters in
// the right style and the store detects its dialect. Any other driver is
// looked up among the drivers registered with database/sql (see
// [Registered]); it returns "" when none is the handle's.
func Name(db *sql.DB) string {
	if name := WellKnown(db.Driver()); name != "" {
		return name
	}
	return Registered(db.Driver())
}

// WellKnown returns the usual name of drv when it is one of the
// well-known drivers (mattn/go-sqlite3 "sqlite3", go-sql-driver/mysql
// "mysql", lib/pq "postgres", pgx "pgx", modernc.org/sqlite "sqlite"),
// recognised by type, else "".
func WellKnown(drv driver.Driver) string {
	switch fmt.Sprintf("%T", drv) {
	case "*sqlite3.SQLiteDriver":
		return "sqlite3"
	case "*mysql.MySQLDriver":
		return "mysql"
	case "*pq.Driver":
		return "postgres"
	case "*stdlib.Driver":
		return "pgx"
	case "*sqlite.Driver":
		return "sqlite"
	}
	return ""
}

// known tells whether a driver name has a dialect (see SetKnown).
var known atomic.Pointer[func(name string) bool]

// SetKnown sets the function that tells whether a driver name has a
// dialect (jdbcstore sets it): [Registered] prefers such a name when a
// driver is registered under several.
func SetKnown(fn func(name string) bool) { known.Store(&fn) }

func isKnown(name string) bool {
	fn := known.Load()
	return fn != nil && *fn != nil && (*fn)(name)
}

// Registered returns the name drv is registered under with database/sql
// (sql.Register), a driver of a third-party dialect say, or "" when it is
// under none. A *sql.DB does not keep the name it was opened with, so each
// registered driver is opened (sql.Open does not connect) and compared:
// the same driver value first (for a driver type that cannot be compared,
// the same type), else a driver of the same type, as a connector given to
// sql.OpenDB returns when it makes a new driver value. Among several
// names, one with a dialect is preferred, then the first in sql.Drivers'
// sorted order.
func Registered(drv driver.Driver) string {
	if drv == nil {
		return ""
	}
	t := reflect.TypeOf(drv)
	// Ranks of a name: 3 the same value with a dialect, 2 the same type
	// with a dialect, 1 the same value, 0 the same type.
	best, bestRank := "", -1
	for _, name := range sql.Drivers() {
		od := ByName(name)
		if od == nil || reflect.TypeOf(od) != t {
			continue
		}
		rank := 0
		if !t.Comparable() || od == drv {
			rank = 1
		}
		if isKnown(name) {
			rank += 2
		}
		if rank > bestRank {
			best, bestRank = name, rank
		}
	}
	return best
}

// ByName returns the driver registered with database/sql under name, or
// nil when none is. (sql.Open does not connect.)
func ByName(name string) driver.Driver {
	db, err := sql.Open(name, "")
	if err != nil {
		return nil
	}
	defer db.Close()
	return db.Driver()
}

// Wrap returns db as an *sqlx.DB named after its driver (see Name); nil
// for a nil db.
func Wrap(db *sql.DB) *sqlx.DB {
	if db == nil {
		return nil
	}
	return sqlx.NewDb(db, Name(db))
}

// Of returns the *sqlx.DB of a handle given as either type (see Wrap for
// a *sql.DB); nil for a nil handle.
func Of[DB *sql.DB | *sqlx.DB](db DB) *sqlx.DB {
	switch db := any(db).(type) {
	case *sqlx.DB:
		return db
	case *sql.DB:
		return Wrap(db)
	}
	return nil
}
