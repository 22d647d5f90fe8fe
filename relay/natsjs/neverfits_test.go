package natsjs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A message larger than its stream's MaxBytes (Discard: DiscardNew) is
// refused as "maximum bytes exceeded" even by an empty stream: no room a
// consumer makes could take it, so it is a refusal (ErrRejected, DEAD
// after MaxAttempts), not a full stream waiting for ever, uncharged. A
// message that fits is still taken.
func TestMessageLargerThanTheStreamIsRejected(t *testing.T) {
	_, js := connect(t)
	_, prefix := newStream(t, js, func(c *jetstream.StreamConfig) {
		c.MaxBytes = 1024
		c.Discard = jetstream.DiscardNew
	})
	r, logs, _, _ := probingRelay(t, js, "{aggregate_id}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big, err := core.NewEvent("T").AggregateID(prefix + ".big").PayloadBytes(make([]byte, 4000)).Build()
	if err != nil {
		t.Fatal(err)
	}
	err = r.OnEvent(ctx, big)
	var unavailable *core.UnavailableError
	if !errors.Is(err, natsjs.ErrRejected) || errors.As(err, &unavailable) {
		t.Fatalf("OnEvent(4000 bytes into a 1024-byte stream) = %v; want ErrRejected, not put off", err)
	}
	if n := logs.Count("level=ERROR"); n != 0 {
		t.Errorf("%d ERROR lines, want none (no full destination, no outage):\n%s", n, logs)
	}
	if err := r.OnEvent(ctx, aggregateEvent(t, prefix+".small")); err != nil {
		t.Errorf("a small event after it: %v", err)
	}
}

// The account's storage full and the server's storage full are told
// apart from each other and from other refusals.
func TestIsAccountOrServerStoreFull(t *testing.T) {
	for _, tc := range []struct {
		code, errCode        int
		desc                 string
		account, serverStore bool
	}{
		{400, 10002, "resource limits exceeded for account", true, false},
		{400, 0, "resource limits exceeded for account", true, false},
		{503, 10023, "insufficient resources", false, true},
		{503, 0, "insufficient resources", false, true},
		{503, 10077, "maximum bytes exceeded", false, false},
		{400, 10003, "bad request", false, false},
		{503, 0, "JetStream system temporarily unavailable", false, false},
	} {
		e := &jetstream.APIError{Code: tc.code, ErrorCode: jetstream.ErrorCode(tc.errCode), Description: tc.desc}
		if got := natsjs.IsAccountFull(e); got != tc.account {
			t.Errorf("IsAccountFull(%d %d %q) = %v, want %v", tc.code, tc.errCode, tc.desc, got, tc.account)
		}
		if got := natsjs.IsServerStoreFull(e); got != tc.serverStore {
			t.Errorf("IsServerStoreFull(%d %d %q) = %v, want %v", tc.code, tc.errCode, tc.desc, got, tc.serverStore)
		}
	}
}

// Close of an idle relay returns nil, whatever its ctx: with an expired
// one it returned nil or ctx's error at random.
func TestCloseIdleWithExpiredContext(t *testing.T) {
	_, js := connect(t)
	for range 50 {
		r, err := natsjs.New(js, natsjs.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.Close(ctx); err != nil {
			t.Fatalf("Close(expired ctx) of an idle relay = %v, want nil", err)
		}
	}
}

// After Close, OnEvent's error matches core.ErrClosed, as the RabbitMQ
// relay's does.
func TestErrClosedIsCoreErrClosed(t *testing.T) {
	if !errors.Is(natsjs.ErrClosed, core.ErrClosed) {
		t.Fatal("natsjs.ErrClosed does not match core.ErrClosed")
	}
}
