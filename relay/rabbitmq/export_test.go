package rabbitmq

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Deliver publishes msg through r as OnEvent publishes the message of an
// event, for a message OnEvent would not build (one the broker refuses
// for a reason that names no exchange).
func Deliver(ctx context.Context, r *Relay, exchange, key string, msg amqp.Publishing) error {
	return r.deliver(ctx, exchange, key, msg)
}

// TakeSlots occupies n of r's MaxInFlight publish slots, as publishes
// awaiting their confirm would, until release is called.
func TakeSlots(r *Relay, n int) (release func()) {
	for range n {
		r.sem <- struct{}{}
	}
	return func() {
		for range n {
			<-r.sem
		}
	}
}
