// Command example runs the outbox to JetStream to inbox path end to end
// against a local NATS server with JetStream:
//
//	go run ./relay/natsjs/example -url nats://127.0.0.1:4222 -n 5
//
// An "orders" service commits OrderPlaced events to its outbox (SQLite);
// the natsjs relay publishes them to a JetStream stream; a "billing"
// service consumes the stream and hands each message to its inbox
// (SQLite), keyed by the event id (Outbox-Event-Id, read through
// natsjs.DecodeHeaders), which records an invoice exactly once however
// often the message comes. The program then replays one event through the
// relay (the stream's duplicate window drops it) and one message through
// the inbox (skipped), prints what happened, and deletes its stream.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	url := flag.String("url", envOr("OUTBOX_NATS_URL", envOr("OUTBOX_TEST_NATS_URL", "nats://127.0.0.1:4222")),
		"NATS server URL (JetStream enabled); defaults to $OUTBOX_NATS_URL, else $OUTBOX_TEST_NATS_URL")
	n := flag.Int("n", 5, "number of events to publish")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := Run(ctx, Options{URL: *url, Events: *n}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
