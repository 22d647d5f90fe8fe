package natsjs_test

import (
	"context"
	"log"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// Relay every event of an outbox to JetStream. The stream needs a
// duplicate window (Duplicates) so a redelivered event is stored once.
// The example program in ./example runs the whole path, to an inbox.
func Example() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL, nats.MaxReconnects(-1)) // keep reconnecting through outages
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.>"},
		Storage: jetstream.FileStorage, Duplicates: 5 * time.Minute, // above Dispatcher.Lease (2 min): a crashed node's events come back after it
	})
	if err != nil {
		log.Fatal(err)
	}
	relay, err := natsjs.New(js, natsjs.Config{Subject: "orders.{type}"})
	if err != nil {
		log.Fatal(err)
	}

	db, err := sqlite.Open(filepath.Join("data", "orders.db"))
	if err != nil {
		log.Fatal(err)
	}
	ob, err := outbox.New(ctx, db, outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ob.RegisterAll(relay)
	if err := ob.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() {
		_ = ob.Close(ctx)    // first the outbox: no more deliveries
		_ = relay.Close(ctx) // then the relay: publishes under way end
	}()

	err = ob.InTx(ctx, func(ctx context.Context) error {
		env, err := outbox.JSONEvent("OrderPlaced", `{"order":"42"}`)
		if err != nil {
			return err
		}
		_, err = ob.Publish(ctx, env) // on "orders.OrderPlaced" once JetStream acked it
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
