package natsjs_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// slowLink dials connections whose writes, while slow is set, go out at
// about 20 KB/s (1 KB every 50 ms): a link too slow for a large message.
type slowLink struct{ slow atomic.Bool }

func (l *slowLink) Dial(network, address string) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: c, link: l}, nil
}

type slowConn struct {
	net.Conn
	link *slowLink
}

func (c *slowConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := len(p)
		if c.link.slow.Load() {
			n = min(n, 1024)
			time.Sleep(50 * time.Millisecond) // the link's speed, not a wait for the test
		}
		m, err := c.Conn.Write(p[:n])
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// A link too slow to write one message within the listener's deadline:
// nats.go writes the message holding its connection's lock, heeding no
// context, so OnEvent waited for the whole write (about 15 s here) and
// the dispatcher charged an attempt for a listener hung past its
// deadline. OnEvent returns at the deadline now, putting the event off
// (core.Unavailable, no attempt charged); the publish goes on in the
// background, Close waits for it, and the message reaches the stream.
func TestRelaySlowLinkReturnsAtTheDeadline(t *testing.T) {
	connect(t) // skips, or fails with CI=true, without a server
	link := &slowLink{}
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.SetCustomDialer(link))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".slow"})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 300<<10)
	for i := range payload {
		payload[i] = 'x'
	}
	env, err := core.NewEvent("big").PayloadJSON(append(append([]byte(`"`), payload...), '"')).Build()
	if err != nil {
		t.Fatal(err)
	}
	link.slow.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err = r.OnEvent(ctx, env)
	took := time.Since(start)
	link.slow.Store(false) // the write under way finishes at full speed
	var ue *core.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OnEvent over a too slow link: %v, want core.Unavailable with the deadline", err)
	}
	if took > 5*time.Second { // the deadline (1 s), a grace of 0.1 s, room for a loaded machine
		t.Errorf("OnEvent over a too slow link returned after %v, with a 1 s deadline", took)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	if err := r.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := streamCount(t, st); n != 1 {
		t.Errorf("%d messages in the stream, want the one published in the background", n)
	}
}
