package jdbcstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "outbox-example")
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

	ctx := context.Background()
	store, err := jdbcstore.New(db, jdbcstore.Config{}) // dialect detected from the "sqlite3" driver
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// Insert an event in the same transaction as the business write.
	env, err := core.NewEvent("UserCreated").AggregateType("User").AggregateID("42").
		PayloadJSONString(`{"name":"Ada"}`).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// An unowned row: any node's poller may claim it.
	if err := store.Insert(ctx, tx, env, core.Lease{}); err != nil {
		_ = tx.Rollback()
		fmt.Println(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}

	pending, err := store.PollPending(ctx, time.Now().Add(time.Second), 0, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.Dialect().Name(), store.Table(), len(pending), pending[0].Type, pending[0].Status)
	// Output: sqlite outbox_event 1 UserCreated NEW
}
