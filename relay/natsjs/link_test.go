package natsjs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A publish awaiting its ack when the connection drops stops waiting at
// once: an outage (core.Unavailable wrapping nats.ErrDisconnected). A
// request's reply cannot come on a dropped connection, and nats.go fails
// no pending request on a disconnect: it waited for its whole AckTimeout,
// every worker held meanwhile.
func TestRelayPublishInFlightWhenTheConnectionDrops(t *testing.T) {
	s := startPrivateServer(t)
	js := s.connect(s.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "DROP", Subjects: []string{"drop.>"}}); err != nil {
		t.Fatal(err)
	}
	logger, _ := testsupport.NewLogger()
	r, err := natsjs.New(js, natsjs.Config{Subject: "drop.{type}", AckTimeout: time.Minute, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(context.Background()) }()
	event := func() core.Envelope {
		env, err := core.NewEvent("T").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	if err := r.OnEvent(context.Background(), event()); err != nil {
		t.Fatal(err)
	}
	s.freeze() // the next publish gets no ack
	sent := js.Conn().Stats().OutMsgs
	res := make(chan error, 1)
	go func() { res <- r.OnEvent(context.Background(), event()) }()
	testsupport.WaitFor(t, 20*time.Second, "the publish to be sent", func() bool { return js.Conn().Stats().OutMsgs > sent })
	s.kill() // the connection drops: nats.go reconnects
	select {
	case err := <-res:
		if !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, nats.ErrDisconnected) {
			t.Errorf("the publish in flight when the connection dropped = %v, want an outage wrapping nats.ErrDisconnected", err)
		}
	case <-time.After(30 * time.Second): // AckTimeout is a minute
		t.Fatal("the publish in flight still waits for its ack 30 s after the connection dropped")
	}
}

// Closing the relay after its connection (the usual shutdown order)
// returns at once: the watch of the connection's status ended when it
// found nothing more to read, once an event waited in its buffer (nats.go
// then leaves the channel open), and Close waited for it for ever.
func TestRelayCloseAfterItsConnection(t *testing.T) {
	for i := range 20 {
		nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		r, err := natsjs.New(js, natsjs.Config{Subject: "close.{type}"})
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done <- r.Close(ctx)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Close = %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close after the connection's still running after 20 s", i)
		}
	}
}
