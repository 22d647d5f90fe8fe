package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
	"github.com/outbox-go/outbox/retry"
)

// wantRejected fails t unless err is a normal failure wrapping
// ErrRejected and cause, and logs no outage.
func wantRejected(t *testing.T, what string, err, cause error, logs *testsupport.LogBuffer) {
	t.Helper()
	if !errors.Is(err, natsjs.ErrRejected) || !errors.Is(err, cause) || errors.Is(err, core.ErrUnavailable) {
		t.Errorf("%s = %v, want a normal failure wrapping ErrRejected and %v", what, err, cause)
	}
	if n := logs.Count("level=ERROR"); n != 0 {
		t.Errorf("%s: %d ERROR lines, want none (the server is healthy):\n%s", what, n, logs)
	}
}

// A subject no stream listens on, but a plain NATS subscriber does, gets
// no "no responders" and no ack: once AckTimeout passed with the
// connection up, the relay asks the JetStream API which stream listens
// on the subject, finds none, and fails the event with ErrNoStream (a
// normal failure: retried, DEAD after MaxAttempts) instead of putting it
// off for ever as an outage of a healthy server.
func TestRelayNoStreamPlainSubscriber(t *testing.T) {
	nc, js := connect(t)
	_, prefix := newStream(t, js, nil)
	silent, _ := silentSubject(t, nc)
	logger, logs := testsupport.NewLogger()
	r, err := natsjs.New(js, natsjs.Config{
		SubjectFunc: func(env core.Envelope) (string, error) {
			if env.Type() == "silent" {
				return silent, nil
			}
			return prefix + ".ok", nil
		},
		AckTimeout: 200 * time.Millisecond, Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: 10 * time.Millisecond, RetryAfter: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	silentEvent, err := core.NewEvent("silent").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	wantRejected(t, "a publish to a plain subscriber's subject", r.OnEvent(context.Background(), silentEvent), natsjs.ErrNoStream, logs)

	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{Workers: 4, MaxAttempts: 2,
		Retry: retry.Exponential{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}, r)
	relaytest.Publish(t, ob, silentEvent)
	ok, err := core.NewEvent("ok").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Publish(t, ob, ok)
	testsupport.WaitFor(t, 30*time.Second, "the silent event DEAD and the other DONE", func() bool {
		c := relaytest.Counts(t, ob)
		return c[core.StatusDead] == 1 && c[core.StatusDone] == 1
	})
	rec, err := ob.Get(context.Background(), silentEvent.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != core.StatusDead || rec.Attempts != 2 {
		t.Errorf("the silent event: %v after %d attempts (%s), want DEAD after 2", rec.Status, rec.Attempts, rec.LastError)
	}
	if n := logs.Count("level=ERROR", "broker unreachable"); n != 0 {
		t.Errorf("%d outages logged for a healthy server:\n%s", n, logs)
	}
}

// A stream with NoAck stores a message without acknowledging it: the
// relay cannot know the event was stored, and says so with a normal
// failure (ErrStreamNoAck, with ErrRejected) rather than an outage.
func TestRelayNoAckStream(t *testing.T) {
	_, js := connect(t)
	st, prefix := newStream(t, js, func(c *jetstream.StreamConfig) { c.NoAck = true })
	logger, logs := testsupport.NewLogger()
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}", AckTimeout: 200 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	env, err := core.NewEvent("T").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	wantRejected(t, "a publish to a NoAck stream", r.OnEvent(context.Background(), env), natsjs.ErrStreamNoAck, logs)
	if n := streamCount(t, st); n != 1 {
		t.Errorf("the NoAck stream holds %d messages, want the one published", n)
	}
}

// stallJS is a JetStream context whose publishes, while stalled, are
// sent nowhere and never answered, as by a stream that does not answer;
// it counts the relay's questions to the JetStream API.
type stallJS struct {
	jetstream.JetStream
	stalled atomic.Bool
	lookups atomic.Int32
}

func (s *stallJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if s.stalled.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.JetStream.PublishMsg(ctx, m, opts...)
}

func (s *stallJS) StreamNameBySubject(ctx context.Context, subject string) (string, error) {
	s.lookups.Add(1)
	return s.JetStream.StreamNameBySubject(ctx, subject)
}

func (s *stallJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s.lookups.Add(1)
	return s.JetStream.Stream(ctx, name)
}

// A stream that listens on the subject but does not acknowledge within
// AckTimeout is an outage (the event put off, no attempt charged), as
// before: the JetStream API names the stream, which has no NoAck. The
// publishes that time out together make one incident, one ERROR and one
// lookup; a publish acknowledged in time asks nothing.
func TestRelayStreamWithoutAckIsOutage(t *testing.T) {
	_, js := connect(t)
	_, prefix := newStream(t, js, nil)
	sj := &stallJS{JetStream: js}
	logger, logs := testsupport.NewLogger()
	r, err := natsjs.New(sj, natsjs.Config{Subject: prefix + ".{type}", AckTimeout: 200 * time.Millisecond, Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	event := func() core.Envelope {
		env, err := core.NewEvent("T").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	for range 20 {
		if err := r.OnEvent(context.Background(), event()); err != nil {
			t.Fatal(err)
		}
	}
	if n := sj.lookups.Load(); n != 0 {
		t.Fatalf("%d JetStream API requests for acknowledged publishes, want none", n)
	}

	sj.stalled.Store(true)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- r.OnEvent(context.Background(), event()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var ue *core.UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, natsjs.ErrNoAck) {
			t.Errorf("a publish the stream did not acknowledge = %v, want a core.Unavailable error wrapping ErrNoAck", err)
		}
	}
	if n := sj.lookups.Load(); n != 2 {
		t.Errorf("%d JetStream API requests for 8 publishes timing out together, want 2 (the stream's name and info, once)", n)
	}
	if n := logs.Count("level=ERROR", "broker unreachable"); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
	}
}

// permissionRelay starts a private server whose user may not publish to
// "denied.>", connects with the error handler handle, creates stream PERM
// on "denied.>" and "ok.>" and returns a relay publishing to
// "{aggregate_type}.{type}" with a short AckTimeout, the stream and the
// relay's logs.
func permissionRelay(t *testing.T, handle nats.ErrHandler) (*privateServer, *natsjs.Relay, jetstream.Stream, *testsupport.LogBuffer) {
	t.Helper()
	s := startPrivateServerWith(t, `authorization { users = [ {user: u, password: p, permissions: { publish: { allow: [">"], deny: ["denied.>"] } } } ] }`)
	js := s.connect("nats://u:p@127.0.0.1:"+strconv.Itoa(s.port), nats.ErrorHandler(handle))
	st, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "PERM", Subjects: []string{"denied.>", "ok.>"}})
	if err != nil {
		t.Fatal(err)
	}
	logger, logs := testsupport.NewLogger()
	r, err := natsjs.New(js, natsjs.Config{Subject: "{aggregate_type}.{type}", AckTimeout: 300 * time.Millisecond, Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: 10 * time.Millisecond, RetryAfter: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return s, r, st, logs
}

// permEvent is an event of type typ and aggregate type agg.
func permEvent(t *testing.T, agg, typ string) core.Envelope {
	t.Helper()
	env, err := core.NewEvent(typ).AggregateType(agg).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// A publish the server refuses for the connection's permissions gets an
// error from the server (a permissions violation) and no ack: once
// AckTimeout passed, the event fails as ErrRejected wrapping
// nats.ErrPermissionViolation, a normal failure (retried, DEAD after
// MaxAttempts), not an outage that put it off for ever and logged an
// ERROR and a "recovered" line every few seconds. Events to permitted
// subjects go on.
func TestRelayPublishPermissionDenied(t *testing.T) {
	s, r, st, logs := permissionRelay(t, func(*nats.Conn, *nats.Subscription, error) {})
	event := func(agg string) core.Envelope { return permEvent(t, agg, "T") }
	for range 2 {
		wantRejected(t, "a publish to a denied subject", r.OnEvent(context.Background(), event("denied")), nats.ErrPermissionViolation, logs)
		if err := r.OnEvent(context.Background(), event("ok")); err != nil {
			t.Fatalf("a publish to a permitted subject: %v", err)
		}
	}
	if n := streamCount(t, st); n != 2 {
		t.Errorf("%d messages in the stream, want the 2 permitted ones", n)
	}
	// nats.go keeps the last refusal until a reconnect: a later publish
	// to that subject without an ack for another reason (a frozen
	// server) is an outage, not that old refusal again.
	s.freeze()
	err := r.OnEvent(context.Background(), event("denied"))
	s.signal(syscall.SIGCONT)
	if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, natsjs.ErrRejected) {
		t.Errorf("a publish to the once denied subject of a frozen server = %v, want an outage", err)
	}
}

// Publishes refused at the same moment on several subjects are each a
// refusal: the connection's last error holds the latest refusal only, so
// the relay records each from the connection's error handler, and calls
// the handler the application set before it. A refusal the relay saw
// before a publish began says nothing of that publish.
func TestRelayConcurrentPermissionDenials(t *testing.T) {
	var handled atomic.Int32
	s, r, st, logs := permissionRelay(t, func(*nats.Conn, *nats.Subscription, error) { handled.Add(1) })
	event := func(agg, typ string) core.Envelope { return permEvent(t, agg, typ) }
	const n = 4
	for round := range 2 {
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- r.OnEvent(context.Background(), event("denied", fmt.Sprintf("T%d", i))) }()
		}
		for range n {
			wantRejected(t, fmt.Sprintf("round %d: a publish to a denied subject beside others", round), <-errs, nats.ErrPermissionViolation, logs)
		}
		if err := r.OnEvent(context.Background(), event("ok", "T")); err != nil {
			t.Fatalf("a publish to a permitted subject: %v", err)
		}
	}
	if got := handled.Load(); got != 2*n {
		t.Errorf("the application's error handler was called %d times, want %d (each refusal)", got, 2*n)
	}
	if c := streamCount(t, st); c != 2 {
		t.Errorf("%d messages in the stream, want the 2 permitted ones", c)
	}
	// The refusals recorded do not make a later publish to one of those
	// subjects that gets no ack for another reason (a frozen server) a
	// refusal.
	s.freeze()
	err := r.OnEvent(context.Background(), event("denied", "T0"))
	s.signal(syscall.SIGCONT)
	if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, natsjs.ErrRejected) {
		t.Errorf("a publish to a once denied subject of a frozen server = %v, want an outage", err)
	}
}
