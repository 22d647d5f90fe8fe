package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A publish under way when an outage began that fails only after the
// outage ended (its ack never came; its deadline passes after another
// publish's ack) belongs to that outage: it is put off, and declares no
// second one. One incident, one ERROR and one "recovered" line.
func TestRelayLateFailureAfterRecovery(t *testing.T) {
	nc, js := connect(t)
	_, prefix := newStream(t, js, nil)
	silent, arrived := silentSubject(t, nc)

	logger, logs := testsupport.NewLogger()
	r, err := natsjs.New(js, natsjs.Config{
		SubjectFunc: func(env core.Envelope) (string, error) {
			if env.Type() == "silent" {
				return silent, nil
			}
			return prefix + ".ok", nil
		},
		AckTimeout: time.Minute, Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: time.Millisecond, RetryAfter: time.Millisecond}})
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
	// start publishes a silent event under ctx and waits until it reached
	// the subscriber: its publish is under way.
	start := func(ctx context.Context) <-chan error {
		t.Helper()
		env := event("silent")
		res := make(chan error, 1)
		go func() { res <- r.OnEvent(ctx, env) }()
		select {
		case id := <-arrived:
			if id != env.ID() {
				t.Fatalf("the subscriber got %s, want %s", id, env.ID())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the silent publish did not arrive")
		}
		return res
	}

	lateCtx := relaytest.NewExpiring()
	late := start(lateCtx) // under way before the outage
	firstCtx := relaytest.NewExpiring()
	first := start(firstCtx)
	firstCtx.Expire() // no ack before its deadline: the outage begins
	relaytest.WantPutOff(t, "the publish that began the outage", first, natsjs.ErrNoAck)
	if n := logs.Count("level=ERROR", "broker unreachable"); n != 1 {
		t.Fatalf("%d ERROR lines after the first failure, want 1:\n%s", n, logs)
	}
	ok := event("ok")
	testsupport.WaitFor(t, 30*time.Second, "a probe acknowledged", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.OnEvent(ctx, ok) == nil
	})
	testsupport.WaitFor(t, 30*time.Second, "the recovered line (Settle after the probe's ack)", func() bool {
		return logs.Count("level=INFO", "broker recovered") == 1
	})

	lateCtx.Expire() // the earlier publish's deadline passes after the recovery
	relaytest.WantPutOff(t, "the publish under way before the outage", late, natsjs.ErrNoAck)
	if err := r.OnEvent(context.Background(), ok); err != nil {
		t.Errorf("a publish after the late failure: %v", err)
	}
	if down, up := logs.Count("level=ERROR", "broker unreachable"), logs.Count("level=INFO", "broker recovered"); down != 1 || up != 1 {
		t.Errorf("%d ERROR lines and %d recovered lines, want 1 and 1:\n%s", down, up, logs)
	}
}
