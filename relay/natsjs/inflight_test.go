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
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// silentSubject subscribes to a new subject without ever replying, so a
// JetStream publish there gets no ack (and no "no responders"), and
// returns it with the ids (Nats-Msg-Id) of the messages it receives.
func silentSubject(t *testing.T, nc *nats.Conn) (string, <-chan string) {
	t.Helper()
	subject := "natsjs-silent-" + uniq()
	arrived := make(chan string, 64)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) { arrived <- m.Header.Get(jetstream.MsgIDHeader) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return subject, arrived
}

// MaxInFlight bounds the publishes the relay awaits acks for: with both
// slots taken, a third event is not published and is put off when its
// ctx ends. A publish that gave up on its ack frees its slot and leaves
// nothing behind in the JetStream context.
func TestRelayMaxInFlight(t *testing.T) {
	nc, js := connect(t)
	silent, arrived := silentSubject(t, nc)
	const maxInFlight = 2
	clock := testsupport.NewClock(testsupport.Epoch)
	logger, _ := testsupport.NewLogger()
	newRelay := func(js jetstream.JetStream) *natsjs.Relay {
		r, err := natsjs.New(js, natsjs.Config{Subject: silent, MaxInFlight: maxInFlight, AckTimeout: time.Minute,
			Logger: logger, Breaker: relay.BreakerConfig{ProbeInterval: time.Second, Now: clock.Now}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r
	}
	event := func() core.Envelope {
		env, err := core.NewEvent("silent").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	// publish starts an event's delivery under a ctx the test expires.
	type publish struct {
		id  string
		ctx *relaytest.Expiring
		res chan error
	}
	start := func(r *natsjs.Relay) publish {
		env := event()
		p := publish{id: env.ID(), ctx: relaytest.NewExpiring(), res: make(chan error, 1)}
		go func() { p.res <- r.OnEvent(p.ctx, env) }()
		return p
	}
	wait := func(what string, res <-chan error) error {
		t.Helper()
		select {
		case err := <-res:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still running", what)
			return nil
		}
	}
	arrival := func() string {
		t.Helper()
		select {
		case id := <-arrived:
			return id
		case <-time.After(30 * time.Second):
			t.Fatal("no publish arrived")
			return ""
		}
	}
	// nothingMore checks that no other publish reached the subject: a
	// marker sent after them arrives first.
	nothingMore := func() {
		t.Helper()
		m := nats.NewMsg(silent)
		m.Header.Set(jetstream.MsgIDHeader, "marker")
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if id := arrival(); id != "marker" {
			t.Errorf("publish %s arrived beyond the bound", id)
		}
	}

	// The relay's own bound: two publishes await their acks, the third
	// waits for a slot and is never sent.
	r := newRelay(js)
	inFlight := []publish{start(r), start(r)}
	got := map[string]bool{arrival(): true, arrival(): true}
	if !got[inFlight[0].id] || !got[inFlight[1].id] {
		t.Fatalf("arrived %v, want the two publishes started", got)
	}
	third := start(r)
	third.ctx.Expire()
	var ue *core.UnavailableError
	if err := wait("the publish waiting for a slot", third.res); !errors.As(err, &ue) || !strings.Contains(err.Error(), "publish slots") {
		t.Errorf("the publish beyond MaxInFlight = %v, want a core.Unavailable error waiting for a slot", err)
	} else if ue.After != relay.DefaultRetryAfter {
		t.Errorf("the publish beyond MaxInFlight is put off for %v, want Breaker.RetryAfter's default %v", ue.After, relay.DefaultRetryAfter)
	}
	nothingMore()
	for _, p := range inFlight {
		p.ctx.Expire()
		if err := wait("a publish awaiting its ack", p.res); !errors.Is(err, natsjs.ErrNoAck) {
			t.Errorf("a publish whose ctx ended awaiting its ack = %v, want ErrNoAck", err)
		}
	}

	// giveUp publishes n events one after the other (each a probe of the
	// outage the first began), each giving up on its ack at its deadline,
	// and returns the errors of those that were not sent.
	giveUp := func(r *natsjs.Relay, n int) (unsent []error) {
		for range n {
			clock.Advance(time.Second) // the next probe is due
			p := start(r)
			select {
			case <-arrived:
				p.ctx.Expire()
				if err := wait("a publish awaiting its ack", p.res); !errors.Is(err, natsjs.ErrNoAck) {
					t.Errorf("a publish whose ctx ended awaiting its ack = %v, want ErrNoAck", err)
				}
			case err := <-p.res:
				unsent = append(unsent, err)
			case <-time.After(30 * time.Second):
				t.Fatal("a publish neither arrived nor returned")
			}
		}
		return unsent
	}
	// A publish given up on leaves nothing pending in the JetStream
	// context (a request, which nats.go forgets when the wait ends): with
	// asynchronous publishes, a context bounding its pending ones (here
	// at MaxInFlight; 4000 by default) refused every publish once that
	// many acks had been given up on, and the relay put every event off.
	own, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxInFlight))
	if err != nil {
		t.Fatal(err)
	}
	if unsent := giveUp(newRelay(own), 2*maxInFlight+1); len(unsent) != 0 {
		t.Errorf("publishes not sent after others were given up on: %v", unsent)
	}
	nothingMore()
}

// A call whose ctx ended before it asked for a publish slot (nats.go held
// it, behind a write to a slow link) is put off without blaming the
// slots, which were free: with a slot free and ctx done at once, Go's
// select picked either, and half such calls said "waiting for one of 256
// publish slots", sending operators to MaxInFlight.
func TestRelayEndedCtxDoesNotBlameTheSlots(t *testing.T) {
	_, js := connect(t)
	r, err := natsjs.New(js, natsjs.Config{Subject: "natsjs-ended-" + uniq()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	for i := range 20 {
		env, err := core.NewEvent("ended").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		err = r.OnEvent(ctx, env)
		var ue *core.UnavailableError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "publish slots") || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d with an ended ctx and free slots: %v, want core.Unavailable with the deadline, not the slots", i+1, err)
		}
	}
}
