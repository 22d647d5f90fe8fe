package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// subjectRelay returns a relay over js publishing every event to the
// subject *subject (set it before each event) and an event of a
// 1,000,000-byte payload, whose size takes seven digits in the publish
// line.
func subjectRelay(t *testing.T, js jetstream.JetStream) (*natsjs.Relay, core.Envelope, *string) {
	t.Helper()
	subject := new(string)
	r, err := natsjs.New(js, natsjs.Config{AckTimeout: 2 * time.Second,
		SubjectFunc: func(core.Envelope) (string, error) { return *subject, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	env, err := core.NewEvent("T").PayloadBytes(make([]byte, 1_000_000)).Build()
	if err != nil {
		t.Fatal(err)
	}
	return r, env, subject
}

// A subject longer than the publish line nats-server takes (its
// max_control_line, 4096 bytes by default) fails its event as an invalid
// subject, before anything is sent: sent, it made the server close the
// connection, which nats.go does not reconnect, and every event was put
// off for ever. A subject of the longest length allowed, with a payload
// whose size takes seven digits, is stored.
func TestRelayLongSubject(t *testing.T) {
	nc, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, env, subject := subjectRelay(t, js)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	*subject = prefix + "." + strings.Repeat("a", 5000-len(prefix)-1)
	err := r.OnEvent(ctx, env)
	var unavailable *core.UnavailableError
	if !errors.Is(err, natsjs.ErrInvalidSubject) || errors.As(err, &unavailable) {
		t.Fatalf("subject of %d bytes: %v, want a normal failure wrapping ErrInvalidSubject", len(*subject), err)
	}
	if !nc.IsConnected() {
		t.Fatalf("connection %v after the long subject", nc.Status())
	}

	*subject = (*subject)[:4000]
	if err := r.OnEvent(ctx, env); err != nil {
		t.Fatalf("subject of %d bytes: %v", len(*subject), err)
	}
	msgs := streamMsgs(t, st)
	if len(msgs) != 1 || msgs[0].Subject != *subject || msgs[0].Header.Get(jetstream.MsgIDHeader) != env.ID() {
		t.Fatalf("stream holds %d messages, want the one of the 4000-byte subject", len(msgs))
	}
}

// With an inbox prefix of the connection's own (nats.CustomInboxPrefix),
// the reply subject made from it takes more of the publish line: the
// longest subject is shorter by as much, and a longer one fails its event
// before anything is sent (a 4000-byte subject beside a 200-byte prefix
// closed the connection for good). The longest one is stored.
func TestRelayLongSubjectCustomInboxPrefix(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	inbox := "_MYINBOX." + strings.Repeat("p", 200)
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.CustomInboxPrefix(inbox))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	own, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r, env, subject := subjectRelay(t, own)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The reply subject: the prefix, '.', a 22-character unique id, '.',
	// an 8-character token.
	longest := 4096 - 29 - (len(inbox) + 32)
	*subject = prefix + "." + strings.Repeat("a", 4000-len(prefix)-1)
	for _, n := range []int{4000, longest + 1} {
		err := r.OnEvent(ctx, env)
		var unavailable *core.UnavailableError
		if !errors.Is(err, natsjs.ErrInvalidSubject) || errors.As(err, &unavailable) {
			t.Fatalf("subject of %d bytes: %v, want a normal failure wrapping ErrInvalidSubject", n, err)
		}
		if !nc.IsConnected() {
			t.Fatalf("connection %v after a subject of %d bytes", nc.Status(), n)
		}
		*subject = (*subject)[:longest+1]
	}
	*subject = (*subject)[:longest]
	if err := r.OnEvent(ctx, env); err != nil {
		t.Fatalf("subject of %d bytes: %v", len(*subject), err)
	}
	msgs := streamMsgs(t, st)
	if len(msgs) != 1 || msgs[0].Subject != *subject {
		t.Fatalf("stream holds %d messages, want the one of the %d-byte subject", len(msgs), longest)
	}
}
