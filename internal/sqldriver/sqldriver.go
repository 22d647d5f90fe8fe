// Package sqldriver names the database/sql driver of a *sql.DB the way
// sqlx and the dialect detection know it.
package sqldriver

import (
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Name maps well-known database/sql drivers to their sqlx names ("sqlite3",
// "mysql", "postgres", "pgx", "sqlite"), so that sqlx binds parameters in
// the right style and the store detects its dialect. It returns "" for
// any other driver.
func Name(db *sql.DB) string {
	switch fmt.Sprintf("%T", db.Driver()) {
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
