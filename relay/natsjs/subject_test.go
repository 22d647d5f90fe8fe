package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A subject longer than the publish line nats-server takes (its
// max_control_line, 4096 bytes by default) fails its event as an invalid
// subject, before anything is sent: sent, it made the server close the
// connection, which nats.go does not reconnect, and every event was put
// off for ever. A subject of the longest length allowed, with a payload
// whose size takes seven digits, is stored.
func TestRelayLongSubject(t *testing.T) {
	nc, js := connect(t)
	st, prefix := newStream(t, js, nil)
	subject := ""
	r, err := natsjs.New(js, natsjs.Config{AckTimeout: 2 * time.Second,
		SubjectFunc: func(core.Envelope) (string, error) { return subject, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	env, err := core.NewEvent("T").PayloadBytes(make([]byte, 1_000_000)).Build()
	if err != nil {
		t.Fatal(err)
	}
	subject = prefix + "." + strings.Repeat("a", 5000-len(prefix)-1)
	err = r.OnEvent(ctx, env)
	var unavailable *core.UnavailableError
	if !errors.Is(err, natsjs.ErrInvalidSubject) || errors.As(err, &unavailable) {
		t.Fatalf("subject of %d bytes: %v, want a normal failure wrapping ErrInvalidSubject", len(subject), err)
	}
	if !nc.IsConnected() {
		t.Fatalf("connection %v after the long subject", nc.Status())
	}

	subject = subject[:4000]
	if err := r.OnEvent(ctx, env); err != nil {
		t.Fatalf("subject of %d bytes: %v", len(subject), err)
	}
	msgs := streamMsgs(t, st)
	if len(msgs) != 1 || msgs[0].Subject != subject || msgs[0].Header.Get(jetstream.MsgIDHeader) != env.ID() {
		t.Fatalf("stream holds %d messages, want the one of the 4000-byte subject", len(msgs))
	}
}
