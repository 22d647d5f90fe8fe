package outbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/txctx"
)

// The README's quick start: an Outbox, an event, InTx and Publish. After
// commit the listener runs on a worker and the row becomes DONE.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)

	db, err := sqlite.Open(filepath.Join(dir, "app.db")) // or the *sql.DB / *sqlx.DB you already have
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ob, err := outbox.New(ctx, db, outbox.Config{}) // checks the whole Config, then applies the schema
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 1)
	ob.RegisterFunc("UserCreated", func(ctx context.Context, e outbox.Envelope) error {
		delivered <- e.Type() + " " + e.PayloadString() // dedupe downstream by e.ID()
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Close(context.Background())

	var id string
	err = ob.InTx(ctx, func(ctx context.Context) error {
		// business writes here, on the transaction txctx.From(ctx) returns
		env, err := outbox.JSONEvent("UserCreated", `{"name":"Ada"}`)
		if err != nil {
			return err
		}
		id, err = ob.Publish(ctx, env) // inserted on this tx; delivered right after commit
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-delivered)
	if err := ob.Close(ctx); err != nil { // writes the DONE of what was delivered
		panic(err)
	}
	rec, err := ob.Get(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status)
	// Output:
	// UserCreated {"name":"Ada"}
	// DONE
}

// The business write and the event commit together: publish inside the
// business transaction; after commit the listener runs on a worker.
func Example_businessTransaction() {
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

// PublishTx on a transaction of your own: a plain *sql.Tx has no
// after-commit hook, so the event is inserted unowned and the poller
// delivers it once the transaction committed.
func ExampleOutbox_PublishTx() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	paths := &pathCount{}
	ob, err := outbox.New(ctx, db.DB, outbox.Config{ // a *sql.DB: its driver is detected
		Poller:  poller.Config{Interval: 10 * time.Millisecond, SkipRecent: -1},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: paths, // counts which path the event took
	})
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 1)
	ob.RegisterFunc("OrderPlaced", func(ctx context.Context, e outbox.Envelope) error {
		delivered <- e.Type()
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Close(context.Background())

	tx, err := db.DB.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	env, _ := outbox.JSONEvent("OrderPlaced", `{"order":7}`)
	if _, err := ob.PublishTx(ctx, tx, env); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	fmt.Println(<-delivered, "hot path:", paths.hot.Load(), "poller:", paths.cold.Load())
	// Output: OrderPlaced hot path: 0 poller: 1
}

// pathCount counts the events that reached the workers by the hot path
// and by the poller.
type pathCount struct {
	core.NopMetrics
	hot, cold atomic.Int32
}

func (p *pathCount) HotEnqueued()  { p.hot.Add(1) }
func (p *pathCount) ColdEnqueued() { p.cold.Add(1) }

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
