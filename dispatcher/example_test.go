package dispatcher_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A dispatcher delivers each event to the listeners of its type right
// after the business transaction that published it commits (the hot path),
// and records the outcome in the outbox table. An outbox.Outbox runs one;
// its Config.Dispatcher tunes it, and DispatcherStats shows what it holds.
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
	ob, err := outbox.New(ctx, db, outbox.Config{Dispatcher: dispatcher.Config{
		Workers:     2,
		MaxAttempts: 3, // DEAD after the third failed delivery
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	delivered := make(chan string, 1)
	ob.RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		delivered <- env.AggregateID()
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}

	err = ob.InTx(ctx, func(ctx context.Context) error {
		// ... the business writes go here, on the same transaction ...
		env, err := core.NewEvent("OrderPlaced").AggregateType("Order").AggregateID("A-1").
			PayloadJSONString(`{"total":42}`).Build()
		if err != nil {
			return err
		}
		_, err = ob.Publish(ctx, env)
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
	if err := ob.Close(closeCtx); err != nil {
		fmt.Println(err)
		return
	}
	counts, err := ob.CountByStatus(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("done rows:", counts[core.StatusDone], "held in memory:", ob.DispatcherStats().Hot)
	// Output:
	// delivered order A-1
	// done rows: 1 held in memory: 0
}
