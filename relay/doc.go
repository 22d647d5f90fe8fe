// Package relay holds what the broker relays of this repository share and
// imports no broker client: subject and routing-key templates over an
// event's fields ([Template]), the headers every relayed message carries
// ([Headers]), the outage breaker that turns a broker outage into
// events put off without charging attempts ([Breaker]), and the same for
// the events of one destination full while the broker is up, such as a
// stream or queue at its length limit ([Full]).
//
// The relays themselves are separate Go modules, so an application that
// uses neither broker does not download its client:
//
//   - github.com/outbox-go/outbox/relay/natsjs: NATS JetStream
//   - github.com/outbox-go/outbox/relay/rabbitmq: RabbitMQ
//
// A relay is a [core.Listener]: register it for the event types it should
// forward (or for all of them) and every committed event is published to
// the broker, counted as delivered only once the broker acknowledged it.
package relay
