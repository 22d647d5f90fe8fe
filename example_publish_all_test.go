package outbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Several events of one business transaction go in together with
// PublishAll (one multi-row INSERT on stores that take one, instead of one
// per event; not shown here). After commit
// each takes the hot path, as with Publish; the events of one ordering
// key (here the order's aggregate) are delivered in the order given.
func ExampleOutbox_PublishAll() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()

	ob, err := outbox.New(ctx, db, outbox.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	var (
		mu    sync.Mutex
		steps []string // the order's events, as delivered
		all   sync.WaitGroup
	)
	all.Add(4)
	ob.RegisterAll(outbox.ListenerFunc(func(ctx context.Context, e outbox.Envelope) error {
		if e.AggregateType() == "Order" {
			mu.Lock()
			steps = append(steps, e.Type())
			mu.Unlock()
		}
		all.Done()
		return nil
	}))
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Close(context.Background())

	err = ob.InTx(ctx, func(ctx context.Context) error {
		var envs []outbox.Envelope
		for i, typ := range []string{"OrderPlaced", "OrderPaid", "OrderShipped"} {
			env, err := outbox.NewEvent(typ).AggregateType("Order").AggregateID("42").Ordered().
				PayloadJSONString(fmt.Sprintf(`{"step":%d}`, i+1)).Build()
			if err != nil {
				return err
			}
			envs = append(envs, env)
		}
		invoice, err := outbox.JSONEvent("InvoiceRequested", `{"order":42}`)
		if err != nil {
			return err
		}
		ids, err := ob.PublishAll(ctx, append(envs, invoice)...)
		if err != nil {
			return err // InTx rolls back: none of the events exists
		}
		fmt.Println(len(ids), "events published")
		return nil
	})
	if err != nil {
		panic(err)
	}
	all.Wait()
	mu.Lock()
	fmt.Println(steps) // the order's events in order (the invoice, unordered, is not listed)
	mu.Unlock()
	// Output:
	// 4 events published
	// [OrderPlaced OrderPaid OrderShipped]
}
