package rabbitmq_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// Relay every event of an outbox to the exchange "events" (which must
// exist, with queues bound to it), routed by "orders.<event type>". This
// example needs a broker, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = db.Close() }()

	rl, err := rabbitmq.New(ctx, rabbitmq.Config{
		URL:        "amqp://guest:guest@127.0.0.1:5672/",
		Exchange:   "events",
		RoutingKey: "orders.{type}",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = rl.Close(ctx) }() // after the outbox: deferred first, runs last

	ob, err := outbox.New(ctx, db, outbox.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ob.RegisterAll(rl)
	if err := ob.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = ob.Close(ctx) }()

	err = ob.InTx(ctx, func(ctx context.Context) error {
		env, err := outbox.JSONEvent("OrderPlaced", `{"order":42}`)
		if err != nil {
			return err
		}
		_, err = ob.Publish(ctx, env) // reaches RabbitMQ after commit, confirmed
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
}
