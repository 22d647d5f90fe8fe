package rabbitmq

import (
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Errors a publish can fail with, matched with errors.Is. The ones that
// are the event's fault (ErrUnroutable, ErrRefused, ErrInvalidMessage)
// are normal failures: the event is retried and ends DEAD after
// MaxAttempts. The others (ErrNacked: a queue with no room; and those
// that mean the broker cannot be reached) are wrapped in
// core.Unavailable: the event is put off without charging an attempt.
var (
	// ErrUnroutable: the broker returned the mandatory message because no
	// queue is bound to receive it (basic.return, NO_ROUTE). Bind a queue
	// for the routing key, or set Config.AllowUnroutable.
	ErrUnroutable = errors.New("rabbitmq: message unroutable (returned by the broker: no queue is bound for its routing key)")
	// ErrNacked: the broker nacked the message (basic.nack). RabbitMQ
	// does so when a queue the message was routed to cannot take it: a
	// queue at its x-max-length or x-max-length-bytes with x-overflow
	// reject-publish (or reject-publish-dlx), or one whose process
	// failed. Neither is the message's fault, and the broker's other
	// queues take their messages: the event is put off (core.Unavailable,
	// no attempt charged, no outage begun) until the queue has room. One
	// ERROR is logged when the messages of an exchange and routing key
	// are first nacked and one INFO ("full destination takes messages
	// again") once each nacked one was confirmed. Meanwhile one event per
	// Breaker.ProbeInterval of that exchange and routing key is published
	// to try the queue; the others are put off without a publish. A
	// message routed to several queues is nacked when one of them is
	// full, but the others took it: each probe puts another copy in them
	// (and, with reject-publish-dlx, each nack dead-letters one) until the
	// full queue has room; consumers deduplicate on message_id.
	ErrNacked = errors.New("rabbitmq: message nacked by the broker")
	// ErrRefused: the broker closed the publishing channel because of the
	// message, such as 404 NOT_FOUND for a missing exchange, 403
	// ACCESS_REFUSED or 406 PRECONDITION_FAILED. The *amqp091.Error with
	// the reply code is wrapped too (errors.As). The relay blames the
	// message when the broker's reason names its exchange, or when it was
	// the only message on the channel the broker had not answered,
	// whatever the reason says; otherwise it publishes it again alone, on
	// a channel of its own, where a refusal can only be its own. The other
	// messages that awaited their confirms on the closed channel are
	// published again too: one the broker had already routed then reaches
	// its queues twice. The relay opens a new channel for the next publish.
	ErrRefused = errors.New("rabbitmq: broker refused the message")
	// ErrInvalidMessage: the event cannot travel as an AMQP message: its
	// expanded exchange or routing key, its id, its type or a header name
	// is longer than 255 bytes, a non-empty Exchange template expands to
	// "" for it (the default exchange is only used for an Exchange of ""),
	// or it has a header named "CC" or "BCC"
	// (in this case), which RabbitMQ reserves for sender-selected
	// distribution (an array of further routing keys: the broker refuses
	// a string there, and the relay lets no event field add destinations).
	ErrInvalidMessage = errors.New("rabbitmq: event cannot be sent as an AMQP message")
	// ErrConfirmTimeout: no confirm arrived within Config.ConfirmTimeout,
	// or before the listener's ctx deadline when that ended first. Counted
	// as an outage.
	ErrConfirmTimeout = errors.New("rabbitmq: no publisher confirm in time")
	// ErrNotConnected: the relay has no connection to the broker at the
	// moment; it is reconnecting in the background. Counted as an outage.
	ErrNotConnected = errors.New("rabbitmq: not connected to the broker")
	// ErrBlocked: the broker blocked the connection (connection.blocked,
	// a memory or disk alarm) and accepts no publish. Counted as an outage.
	ErrBlocked = errors.New("rabbitmq: connection blocked by the broker")
)

// channelLevel reports whether err is a channel-level exception the broker
// raised (a soft error such as 404 NOT_FOUND or 406 PRECONDITION_FAILED):
// the channel is gone, the connection is fine. Any other close, including
// a network failure the client reports as an *amqp.Error, means the
// connection is gone.
func channelLevel(err *amqp.Error) bool {
	return err != nil && err.Server && err.Recover
}

// errNilConnection is the dial error of a Config.Dial that returned
// neither a connection nor an error.
var errNilConnection = errors.New("rabbitmq: Config.Dial returned a nil connection and a nil error")
