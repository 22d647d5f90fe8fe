package natsjs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// expiring is a context whose deadline the test ends with expire: its
// Err is then context.DeadlineExceeded, as when a listener's deadline
// passes.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiring) expire()                     { c.once.Do(func() { close(c.done) }) }
func (c *expiring) Done() <-chan struct{}       { return c.done }
func (c *expiring) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

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
	putOff := func(what string, res <-chan error) {
		t.Helper()
		select {
		case err := <-res:
			var ue *core.UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, natsjs.ErrNoAck) {
				t.Errorf("%s = %v, want a core.Unavailable error wrapping ErrNoAck", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still running", what)
		}
	}

	lateCtx := newExpiring()
	late := start(lateCtx) // under way before the outage
	firstCtx := newExpiring()
	first := start(firstCtx)
	firstCtx.expire() // no ack before its deadline: the outage begins
	putOff("the publish that began the outage", first)
	if n := logs.Count("level=ERROR", "broker unreachable"); n != 1 {
		t.Fatalf("%d ERROR lines after the first failure, want 1:\n%s", n, logs)
	}
	ok := event("ok")
	testsupport.WaitFor(t, 30*time.Second, "a probe acknowledged", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.OnEvent(ctx, ok) == nil
	})
	if n := logs.Count("level=INFO", "broker recovered"); n != 1 {
		t.Fatalf("%d recovered lines after the probe's ack, want 1:\n%s", n, logs)
	}

	lateCtx.expire() // the earlier publish's deadline passes after the recovery
	putOff("the publish under way before the outage", late)
	if err := r.OnEvent(context.Background(), ok); err != nil {
		t.Errorf("a publish after the late failure: %v", err)
	}
	if down, up := logs.Count("level=ERROR", "broker unreachable"), logs.Count("level=INFO", "broker recovered"); down != 1 || up != 1 {
		t.Errorf("%d ERROR lines and %d recovered lines, want 1 and 1:\n%s", down, up, logs)
	}
}
