// Package jdbcstore implements [core.Store] over SQL databases with sqlx:
// the transactional insert of NEW events, the status writes of the
// dispatcher and the pending scan of the poller.
//
// A [Dialect] gives the primitives of one database (identifier quoting,
// placeholders, time and payload encoding, schema templates), its
// [Capabilities] and the mapping of its driver errors; the store builds
// the SQL of every operation from them. One [Store] runs every dialect
// through sqlx, so *sqlx.DB and *sqlx.Tx share the same code.
//
// This package imports no database driver. The dialects live in
// per-database packages that import their driver and [Register] the
// dialect when imported: jdbcstore/sqlite (mattn/go-sqlite3, the only one
// needing cgo), jdbcstore/mysql (MySQL 8 and MariaDB 10.6+) and
// jdbcstore/postgres (PostgreSQL 13+ through pgx). A store on
// a driver without a registered dialect fails with an error wrapping
// [ErrUnsupportedDriver] that names the packages to import.
//
// Typical SQLite setup:
//
//	db, err := sqlite.Open("app.db")
//	...
//	store, err := jdbcstore.New(db, jdbcstore.Config{})
//	...
//	err = store.ApplySchema(ctx)
//
// Every dialect, ours or a third party's, must pass the conformance suite
// in package jdbcstore/storetest.
package jdbcstore
