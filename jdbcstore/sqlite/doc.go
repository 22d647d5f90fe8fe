// Package sqlite is the SQLite dialect of package jdbcstore, over
// github.com/mattn/go-sqlite3 (driver name "sqlite3").
//
// Importing this package registers [Dialect] with jdbcstore, so stores on
// a "sqlite3" handle detect it; [Open] opens a database file with the
// settings the store needs (WAL, a busy timeout, immediate transactions):
//
//	db, err := sqlite.Open("app.db")
//	...
//	ob, err := outbox.New(ctx, db, outbox.Config{})
//
// mattn/go-sqlite3 is a cgo package: only programs importing this package
// need cgo (CGO_ENABLED=1 and a C compiler). Programs on MySQL/MariaDB
// import jdbcstore/mysql instead and build with CGO_ENABLED=0.
package sqlite
