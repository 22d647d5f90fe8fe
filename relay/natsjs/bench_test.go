package natsjs_test

import (
	"context"
	"fmt"
	"testing"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// BenchmarkRelayThroughput measures events/s from commit to DONE on
// SQLite, through the relay to the shared NATS (nothing consumes the
// stream) and, for comparison, with a listener that does nothing. Events
// are committed 100 per transaction so the commit rate does not bound it,
// and the hot queue holds them all so none waits for the poller.
//
//	go test -run '^$' -bench RelayThroughput -benchtime 20000x ./relay/natsjs/
func BenchmarkRelayThroughput(b *testing.B) {
	for _, target := range []string{"noop", "natsjs"} {
		for _, workers := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/workers=%d", target, workers), func(b *testing.B) {
				var l core.Listener = core.ListenerFunc(func(context.Context, core.Envelope) error { return nil })
				if target == "natsjs" {
					_, js := connect(b)
					_, prefix := newStream(b, js, nil)
					r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
					if err != nil {
						b.Fatal(err)
					}
					l = r
				}
				logger, _ := testsupport.NewLogger()
				ob := relaytest.Outbox(b, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{Workers: workers, HotCapacity: max(b.N, 1000)}}, l)
				relaytest.BenchThroughput(b, ob)
			})
		}
	}
}

// BenchmarkRelayDirect measures the relay alone: OnEvent from 16 and 64
// goroutines, each awaiting its ack, without an outbox.
func BenchmarkRelayDirect(b *testing.B) {
	for _, workers := range []int{16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			_, js := connect(b)
			_, prefix := newStream(b, js, nil)
			r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
			if err != nil {
				b.Fatal(err)
			}
			relaytest.BenchDirect(b, r, workers)
		})
	}
}
