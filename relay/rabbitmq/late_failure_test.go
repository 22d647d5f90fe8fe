package rabbitmq_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// What ackFilter does to the broker's publisher confirms (basic.ack).
const (
	passAcks   = iota
	dropAcks   // the confirm never reaches the client
	singleAcks // the confirm acknowledges its own delivery tag only (multiple cleared)
)

// ackFilter is a connection to the broker that drops, or narrows, the
// publisher confirms it reads, frame by frame; the rest passes as is.
type ackFilter struct {
	net.Conn
	mode    atomic.Int32
	dropped chan struct{} // one value per confirm dropped
	in, out []byte
}

func (c *ackFilter) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		buf := make([]byte, 32<<10)
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		c.frames()
		if err != nil && len(c.out) == 0 {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// frames moves the complete frames of c.in to c.out, filtering confirms.
// A frame: type (1 byte), channel (2), size (4), payload, end (0xCE); a
// method frame's payload starts with the class and method ids, basic.ack
// (60, 80) then has the delivery tag (8) and the multiple bit (1).
func (c *ackFilter) frames() {
	for len(c.in) >= 7 {
		size := int(binary.BigEndian.Uint32(c.in[3:7]))
		end := 7 + size + 1
		if len(c.in) < end {
			return
		}
		f := append([]byte(nil), c.in[:end]...)
		c.in = c.in[end:]
		if f[0] == 1 && size >= 13 && binary.BigEndian.Uint16(f[7:9]) == 60 && binary.BigEndian.Uint16(f[9:11]) == 80 {
			switch c.mode.Load() {
			case dropAcks:
				c.dropped <- struct{}{}
				continue
			case singleAcks:
				f[19] &^= 1
			}
		}
		c.out = append(c.out, f...)
	}
}

// A publish under way when an outage began that fails only after the
// outage ended (its confirm lost, its deadline passing after another
// publish's confirm) belongs to that outage: it is put off, and declares
// no second one. One incident, one ERROR and one "recovered" line.
func TestRelayLateFailureAfterRecovery(t *testing.T) {
	ex, _ := routedExchange(t)
	filter := &ackFilter{dropped: make(chan struct{}, 8)}
	var dialed atomic.Bool
	dial := func(ctx context.Context) (*amqp.Connection, error) {
		if dialed.Swap(true) {
			return nil, errors.New("the test expects one connection")
		}
		return amqp.DialConfig(amqpURL(), amqp.Config{Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			filter.Conn = c
			return filter, err
		}})
	}
	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{Dial: dial, Exchange: ex, Channels: 1, ConfirmTimeout: time.Minute, Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: time.Millisecond, RetryAfter: time.Millisecond}})
	event := func() core.Envelope {
		env, err := core.JSONEvent("a.b", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	if err := r.OnEvent(context.Background(), event()); err != nil { // opens the channel
		t.Fatal(err)
	}

	filter.mode.Store(dropAcks)
	// start publishes an event under ctx and waits until the broker
	// confirmed it and the filter dropped the confirm.
	start := func(ctx context.Context) <-chan error {
		t.Helper()
		res := make(chan error, 1)
		env := event()
		go func() { res <- r.OnEvent(ctx, env) }()
		select {
		case <-filter.dropped:
		case <-time.After(30 * time.Second):
			t.Fatal("no confirm to drop")
		}
		return res
	}
	lateCtx := relaytest.NewExpiring()
	late := start(lateCtx) // under way before the outage
	firstCtx := relaytest.NewExpiring()
	first := start(firstCtx)
	firstCtx.Expire() // no confirm before its deadline: the outage begins
	relaytest.WantPutOff(t, "the publish that began the outage", first, rabbitmq.ErrConfirmTimeout)
	if n := logs.Count("level=ERROR", "broker unreachable"); n != 1 {
		t.Fatalf("%d ERROR lines after the first failure, want 1:\n%s", n, logs)
	}

	// Confirms come again, each for its own message only, so none
	// confirms the late publish.
	filter.mode.Store(singleAcks)
	testsupport.WaitFor(t, 30*time.Second, "a probe confirmed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.OnEvent(ctx, event()) == nil
	})
	testsupport.WaitFor(t, 30*time.Second, "the recovered line (Settle after the probe's confirm)", func() bool {
		return logs.Count("level=INFO", "broker recovered") == 1
	})

	lateCtx.Expire() // the earlier publish's deadline passes after the recovery
	relaytest.WantPutOff(t, "the publish under way before the outage", late, rabbitmq.ErrConfirmTimeout)
	if err := r.OnEvent(context.Background(), event()); err != nil {
		t.Errorf("a publish after the late failure: %v", err)
	}
	if down, up := logs.Count("level=ERROR", "broker unreachable"), logs.Count("level=INFO", "broker recovered"); down != 1 || up != 1 {
		t.Errorf("%d ERROR lines and %d recovered lines, want 1 and 1:\n%s", down, up, logs)
	}
}
