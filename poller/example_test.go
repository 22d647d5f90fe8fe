package poller_test

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
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/registry"
)

// The poller is the safety net of the hot path: it claims due events that
// no running process holds (published while the hot queue was full, by a
// process that crashed, or due for a retry) and hands them to the
// dispatcher. Start runs it every Config.Interval; PollOnce runs one cycle,
// as here.
func Example() {
	dir, err := os.MkdirTemp("", "poller-example")
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

	// An event left in the table with no owner, as after a crash.
	env, err := core.NewEvent("OrderPlaced").AggregateID("A-7").PayloadJSONString(`{}`).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.Insert(ctx, db, env, core.Lease{}); err != nil {
		fmt.Println(err)
		return
	}

	delivered := make(chan string, 1)
	reg := registry.New().RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
		delivered <- env.AggregateID()
		return nil
	})
	d, err := dispatcher.New(store, reg, dispatcher.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := d.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close(ctx)

	// SkipRecent -1 takes the event although it was just inserted; by
	// default the poller leaves events younger than a second to the hot
	// path.
	p, err := poller.New(store, d, poller.Config{SkipRecent: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := p.PollOnce(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("read %d, enqueued %d\n", res.Read, res.Enqueued)
	select {
	case id := <-delivered:
		fmt.Println("delivered order", id)
	case <-time.After(10 * time.Second):
		fmt.Println("not delivered")
	}
	// Output:
	// read 1, enqueued 1
	// delivered order A-7
}
