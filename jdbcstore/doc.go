// Package jdbcstore implements [core.Store] over SQL databases with sqlx:
// the transactional insert of NEW events, the status writes of the
// dispatcher and the pending scan of the poller.
//
// A [Dialect] turns the generic operations into the SQL text and arguments
// of one database ([SQLite], [MySQL] for MySQL 8 and MariaDB 10.6+;
// PostgreSQL is added as a further Dialect value) and maps that database's
// driver errors. One [Store] runs every dialect through sqlx, so *sqlx.DB
// and *sqlx.Tx share the same code.
//
// Typical SQLite setup:
//
//	db, err := jdbcstore.OpenSQLite("app.db")
//	...
//	store, err := jdbcstore.New(db, jdbcstore.Config{})
//	...
//	err = store.ApplySchema(ctx)
//
// Every dialect must pass the conformance suite in package
// jdbcstore/storetest.
package jdbcstore
