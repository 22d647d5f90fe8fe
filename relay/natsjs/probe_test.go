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
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A probe the broker refuses for the message's own sake (no stream for
// its subject) proves the broker answers: it ends the outage, so the
// events after it are published again instead of being put off until a
// probe of an acceptable event.
func TestRefusedProbeEndsTheOutage(t *testing.T) {
	srv := startPrivateServer(t)
	js := srv.connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE", Subjects: []string{"probe.ok"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	logger, logs := testsupport.NewLogger()
	r, err := natsjs.New(js, natsjs.Config{Subject: "probe.{type}", AckTimeout: time.Second, Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: 50 * time.Millisecond, RetryAfter: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	event := func(typ string) core.Envelope {
		env, err := core.NewEvent(typ).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	if err := r.OnEvent(ctx, event("ok")); err != nil {
		t.Fatalf("publish before the outage: %v", err)
	}
	srv.kill()
	testsupport.WaitFor(t, 30*time.Second, "the outage reported", func() bool {
		_ = r.OnEvent(ctx, event("ok"))
		return logs.Count("level=ERROR", "broker unreachable") > 0
	})
	srv.start()
	testsupport.WaitFor(t, 60*time.Second, "a probe refused for want of a stream", func() bool {
		return errors.Is(r.OnEvent(ctx, event("nostream")), natsjs.ErrRejected)
	})
	// The refusal is an answer: it ends the outage, so the incident's
	// "recovered" line comes Settle later.
	testsupport.WaitFor(t, 30*time.Second, "the recovered line", func() bool {
		return logs.Count("level=INFO", "broker recovered") == 1
	})
	if err := r.OnEvent(ctx, event("ok")); err != nil {
		t.Errorf("publish after the refused probe: %v", err)
	}
}
