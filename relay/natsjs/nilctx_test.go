package natsjs_test

import (
	"context"
	"testing"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// OnEvent and Close refuse a nil context with core.ErrNilContext before
// anything runs (Close panicked, after marking the relay closed): the
// relay still publishes after the refusals.
func TestNilContextIsRefused(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	if n := testsupport.RefusesNilContext(t, r); n < 2 {
		t.Errorf("called %d methods with a nil context, want 2 or more (OnEvent, Close)", n)
	}
	if err := r.OnEvent(context.Background(), aggregateEvent(t, "a")); err != nil {
		t.Fatalf("OnEvent after the refusals: %v", err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d messages in the stream, want 1", info.State.Msgs)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
