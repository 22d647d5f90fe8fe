package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
)

func TestListenerFunc(t *testing.T) {
	want := errors.New("boom")
	var got core.Envelope
	var l core.Listener = core.ListenerFunc(func(_ context.Context, env core.Envelope) error {
		got = env
		return want
	})
	env := mustBuild(t, ev())
	if err := l.OnEvent(context.Background(), env); err != want {
		t.Errorf("OnEvent = %v", err)
	}
	if got.ID() != env.ID() {
		t.Error("listener did not receive the envelope")
	}
}
