package relay_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay"
)

// A hand-written relay: the destination from a template, the headers of
// every relayed message, and the breaker that turns a broker outage into
// events put off without charging attempts.
func Example() {
	subject := relay.MustParseTemplate("orders.{aggregate_type}.{type}")
	env, err := core.NewEvent("OrderPlaced").ID("ev-1").AggregateType("Order").AggregateID("42").
		PayloadJSONString(`{"total":12}`).Build()
	if err != nil {
		panic(err)
	}
	fmt.Println("subject:", subject.Expand(env))
	relay.Headers(env, func(k, v string) {
		if k == relay.HeaderEventID || k == relay.HeaderAggregateID {
			fmt.Printf("header %s: %s\n", k, v)
		}
	})

	quiet := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "broker", Logger: quiet})
	if err != nil {
		panic(err)
	}
	publish := func() error { return errors.New("connection refused") } // the broker is down
	if err := b.Allow(); err == nil {
		if perr := publish(); perr != nil {
			err = b.Down(perr) // what the listener returns
			fmt.Println("put off without an attempt:", errors.Is(err, core.ErrUnavailable))
		}
	}
	fmt.Println("next event waits for the probe:", b.Allow() != nil)
	// Output:
	// subject: orders.Order.OrderPlaced
	// header Outbox-Event-Id: ev-1
	// header Outbox-Aggregate-Id: 42
	// put off without an attempt: true
	// next event waits for the probe: true
}
