package dispatcher_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/registry"
	"github.com/outbox-go/outbox/txctx"
)

// A dispatcher delivers each event to the listeners of its type right
// after the business transaction that published it commits (the hot path),
// and records the outcome in the outbox table. The root package wires
// these parts for you; this is how they fit together.
func Example() {
	dir, err := os.MkdirTemp("", "dispatcher-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "shop.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()
	store, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(ctx); err != nil {
		fmt.Println(err)
		return
	}

	delivered := make(chan string, 1)
	reg := registry.New().RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		delivered <- env.AggregateID()
		return nil
	})
	d, err := dispatcher.New(store, reg, dispatcher.Config{Workers: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := d.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// The client inserts the event in the caller's transaction and hands
	// it to the dispatcher once that transaction commits.
	client, err := core.NewClient(store, d)
	if err != nil {
		fmt.Println(err)
		return
	}

	err = txctx.NewX(db).Do(ctx, func(ctx context.Context) error {
		// ... the business writes go here, on the same transaction ...
		env, err := core.NewEvent("OrderPlaced").AggregateType("Order").AggregateID("A-1").
			PayloadJSONString(`{"total":42}`).Build()
		if err != nil {
			return err
		}
		_, err = client.Publish(ctx, env)
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	select {
	case id := <-delivered:
		fmt.Println("delivered order", id)
	case <-time.After(10 * time.Second):
		fmt.Println("not delivered")
		return
	}

	// Close lets the workers finish and writes the outstanding outcomes.
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Close(closeCtx); err != nil {
		fmt.Println(err)
		return
	}
	counts, err := store.CountByStatus(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("done rows:", counts[core.StatusDone])
	// Output:
	// delivered order A-1
	// done rows: 1
}
