package rabbitmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// New, OnEvent and Close refuse a nil context with core.ErrNilContext
// before anything runs (New panicked; Close panicked after marking the
// relay closed): the relay still publishes after the refusals.
func TestNilContextIsRefused(t *testing.T) {
	var nilCtx context.Context
	if r, err := rabbitmq.New(nilCtx, rabbitmq.Config{URL: amqpURL()}); !errors.Is(err, core.ErrNilContext) || r != nil {
		t.Errorf("New(nil ctx) = %v, %v; want core.ErrNilContext", r, err)
	}
	ex, got := consumedExchange(t)
	r := newRelay(t, rabbitmq.Config{Exchange: ex})
	if n := testsupport.RefusesNilContext(t, r); n < 2 {
		t.Errorf("called %d methods with a nil context, want 2 or more (OnEvent, Close)", n)
	}
	if err := r.OnEvent(context.Background(), typedEvent(t, "order.placed")); err != nil {
		t.Fatalf("OnEvent after the refusals: %v", err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the event in the queue", func() bool { return got.count() >= 1 }, got.wake)
}
