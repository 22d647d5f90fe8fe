package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Open a SQLite file with the settings the outbox needs (WAL, a busy
// timeout, immediate transactions) and create the outbox table in it.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "outbox-sqlite-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	store, err := jdbcstore.New(db, jdbcstore.Config{Dialect: sqlite.Dialect})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	var mode string
	if err := db.Get(&mode, "PRAGMA journal_mode"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.Dialect().Name(), store.Table(), mode)
	// Output: sqlite outbox_event wal
}

// DSN gives the data source name Open uses, for opening the database
// with database/sql yourself; a plain file name holding '?' is refused
// (write it as a "file:" URI).
func ExampleDSN() {
	dsn, err := sqlite.DSN("app.db")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dsn)
	_, err = sqlite.DSN("orders?.db")
	fmt.Println(errors.Is(err, core.ErrInvalidConfig))
	// Output:
	// app.db?_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_stmt_cache_size=64&_synchronous=NORMAL&_txlock=immediate
	// true
}
