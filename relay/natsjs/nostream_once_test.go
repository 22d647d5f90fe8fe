package natsjs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A publish to a subject no stream listens on is sent once: the relay
// asks the JetStream API which stream listens on it and fails the event
// with ErrNoStream. (nats.go retried a publish nothing answered twice,
// 250 ms apart, so each such event held a worker half a second: with one
// stream missing, every stream's events crawled at a few per second.)
func TestRelayNoStreamPublishesOnce(t *testing.T) {
	nc, js := connect(t)
	r, err := natsjs.New(js, natsjs.Config{Subject: "natsjs-nostream-" + uniq() + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	env, err := core.NewEvent("Lost").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	before := nc.Stats().OutMsgs
	err = r.OnEvent(context.Background(), env)
	if !errors.Is(err, natsjs.ErrNoStream) {
		t.Fatalf("publish to a subject without stream: %v, want ErrNoStream", err)
	}
	// The publish and the JetStream API's lookup of the subject's stream.
	if sent := nc.Stats().OutMsgs - before; sent != 2 {
		t.Errorf("%d messages sent for one event to a subject without stream, want 2 (the publish once, and the stream lookup)", sent)
	}
}
