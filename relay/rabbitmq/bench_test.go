package rabbitmq_test

import (
	"context"
	"fmt"
	"testing"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// benchRelay makes a relay publishing to a fresh exchange with one
// durable queue bound (nothing consumes it), with channels channels.
func benchRelay(b *testing.B, channels int) *rabbitmq.Relay {
	ch := admin(b)
	ex := newExchange(b, ch)
	newQueue(b, ch, ex, "#")
	return newRelay(b, rabbitmq.Config{Exchange: ex, Channels: channels})
}

// BenchmarkRelayThroughput measures events/s from commit to DONE on
// SQLite, through the relay to the shared RabbitMQ (persistent messages
// into a durable classic queue nothing consumes) with 1, 4 and 16
// channels, and, for comparison, with a listener that does nothing.
// Events are committed 100 per transaction so the commit rate does not
// bound it, and the hot queue holds them all so none waits for the
// poller.
//
//	go test -run '^$' -bench RelayThroughput -benchtime 20000x ./relay/rabbitmq/
func BenchmarkRelayThroughput(b *testing.B) {
	for _, target := range []string{"noop", "rabbitmq/channels=1", "rabbitmq/channels=4", "rabbitmq/channels=16"} {
		for _, workers := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/workers=%d", target, workers), func(b *testing.B) {
				var l core.Listener = core.ListenerFunc(func(context.Context, core.Envelope) error { return nil })
				var channels int
				if _, err := fmt.Sscanf(target, "rabbitmq/channels=%d", &channels); err == nil {
					l = benchRelay(b, channels)
				}
				logger, _ := testsupport.NewLogger()
				ob := relaytest.Outbox(b, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{Workers: workers, HotCapacity: max(b.N, 1000)}}, l)
				relaytest.BenchThroughput(b, ob)
			})
		}
	}
}

// BenchmarkRelayDirect measures the relay alone: OnEvent from 16 and 64
// goroutines, each awaiting its confirm, without an outbox, with 1, 4 and
// 16 channels.
func BenchmarkRelayDirect(b *testing.B) {
	for _, channels := range []int{1, 4, 16} {
		for _, workers := range []int{16, 64} {
			b.Run(fmt.Sprintf("channels=%d/workers=%d", channels, workers), func(b *testing.B) {
				r := benchRelay(b, channels)
				relaytest.BenchDirect(b, r, workers)
			})
		}
	}
}
