package outbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/txctx"
)

// The main flow: publish inside the business transaction; after commit the
// listener runs on a worker and the row becomes DONE.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.MustExec(`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)`)

	ob, err := outbox.New(ctx, db, outbox.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 1)
	ob.RegisterFunc("UserCreated", func(ctx context.Context, e outbox.Envelope) error {
		delivered <- e.Type() + " " + e.AggregateID() + " " + e.PayloadString()
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Close(ctx)

	err = ob.InTx(ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO users (name) VALUES (?)`, "Ada"); err != nil {
			return err
		}
		env, err := outbox.NewEvent("UserCreated").AggregateType("User").AggregateID("1").
			PayloadJSONString(`{"name":"Ada"}`).Build()
		if err != nil {
			return err
		}
		_, err = ob.Publish(ctx, env)
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-delivered)
	// Output: UserCreated 1 {"name":"Ada"}
}

// Publish outside a transaction fails fast and writes nothing.
func ExampleOutbox_Publish_noTransaction() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ob, err := outbox.New(ctx, db, outbox.Config{})
	if err != nil {
		panic(err)
	}
	env, _ := outbox.JSONEvent("UserCreated", `{}`)
	_, err = ob.Publish(ctx, env)
	fmt.Println(err)
	// Output: outbox: no active transaction
}
