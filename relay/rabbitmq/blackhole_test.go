package rabbitmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
	"github.com/outbox-go/outbox/retry"
)

// blackhole makes proxy drop every byte in both directions without
// closing a connection (Toxiproxy's timeout toxic with timeout 0), like a
// peer that vanished from the network. The returned func ends it: it cuts
// the blackholed connections (stopping the proxy), removes the toxics and
// starts the proxy again on its address. Removing the toxics from live
// connections would close them too (the timeout toxic's cleanup), but a
// chunk arriving meanwhile leaves Toxiproxy's goroutine before the toxic
// blocked for ever on a channel nobody reads (a leak goleak reported).
func blackhole(t *testing.T, proxy *toxiproxy.Proxy) (remove func()) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		spec := `{"name":"blackhole-` + stream + `","type":"timeout","stream":"` + stream + `","attributes":{"timeout":0}}`
		if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			t.Fatalf("add the %s blackhole: %v", stream, err)
		}
	}
	return func() {
		proxy.Stop()
		for _, stream := range []string{"upstream", "downstream"} {
			if err := proxy.Toxics.RemoveToxic(context.Background(), "blackhole-"+stream); err != nil {
				t.Errorf("remove the %s blackhole: %v", stream, err)
			}
		}
		if err := proxy.Start(); err != nil {
			t.Errorf("start the proxy again on %s: %v", proxy.Listen, err)
		}
	}
}

// A blackholed connection: the TCP connection stays up but nothing gets
// through, so publishes are written and their confirms never come. Each
// one waits ConfirmTimeout and is put off as an outage (no attempt
// charged, no event DEAD) while events keep being committed; once the
// blackhole ends (its connections cut) the relay dials again, and every
// event reaches the queue and ends DONE with 0 attempts. The log has one ERROR for the outage,
// naming the missing confirm, and one "recovered" line.
func TestRelayBlackhole(t *testing.T) {
	ex, got := consumedExchange(t)
	proxy, proxied := faultProxy(t)

	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{URL: proxied, Exchange: ex, ConfirmTimeout: 500 * time.Millisecond, Logger: logger,
		ReconnectDelay: 50 * time.Millisecond, ReconnectMaxDelay: 200 * time.Millisecond,
		Breaker: relay.BreakerConfig{ProbeInterval: 100 * time.Millisecond, RetryAfter: 200 * time.Millisecond}})
	ob := relaytest.Outbox(t, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{Workers: outageWorkers},
		Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: 100 * time.Millisecond}}, r)

	pub := relaytest.StartPublisher(t, ob, 3*time.Millisecond)
	testsupport.WaitFor(t, 30*time.Second, "events in the queue before the blackhole", func() bool { return got.count() >= 50 }, got.wake)

	remove := blackhole(t, proxy)
	atCut := pub.Count()
	testsupport.WaitFor(t, 30*time.Second, "the outage reported", func() bool { return logs.Count("level=ERROR", "broker unreachable") > 0 })
	if logs.Count("level=ERROR", "no publisher confirm in time") == 0 {
		t.Errorf("the outage's ERROR line does not name the missing confirm:\n%s", strings.Join(logs.Lines("level=ERROR"), "\n"))
	}
	// Several probes time out in turn while events are committed.
	testsupport.WaitFor(t, 30*time.Second, "events committed during the blackhole", func() bool { return pub.Count() >= atCut+300 })
	inOutage := relaytest.Counts(t, ob)
	remove()

	testsupport.WaitFor(t, 60*time.Second, "the recovery reported", func() bool { return logs.Count("level=INFO", "broker recovered") > 0 })
	ids, _, dups := afterOutage(t, ob, got, pub, logs)
	if t.Failed() {
		t.Logf("log:\n%s", logs)
		return
	}
	t.Logf("%d events committed, %d during and after the blackhole (statuses then: %v), %d redelivered duplicates\n%s\n%s\n%s",
		len(ids), len(ids)-atCut, inOutage, dups, logs.Lines("broker unreachable")[0], strings.Join(logs.Lines("level=WARN"), "\n"), logs.Lines("broker recovered")[0])
}

// A listener deadline (the dispatcher's ListenerTimeout, 2 s) shorter than
// ConfirmTimeout (5 s by default) during a blackhole: the wait for the
// confirm ends with the deadline, the same outage as a confirm timeout. No
// event is charged an attempt (two charged deliveries would make it DEAD:
// MaxAttempts is 2) although each is delivered again and again, the
// breaker logs one ERROR naming the missing confirm, and once the toxics
// are removed one "recovered" line, and every event reaches the queue,
// DONE with 0 attempts.
func TestRelayBlackholeListenerDeadline(t *testing.T) {
	ex, got := consumedExchange(t)
	proxy, proxied := faultProxy(t)

	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{URL: proxied, Exchange: ex, Channels: 1, Logger: logger,
		ReconnectDelay: 50 * time.Millisecond, ReconnectMaxDelay: 200 * time.Millisecond,
		Breaker: relay.BreakerConfig{ProbeInterval: 100 * time.Millisecond, RetryAfter: 200 * time.Millisecond}})
	ob := relaytest.Outbox(t, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{Workers: 4,
		ListenerTimeout: 2 * time.Second, MaxAttempts: 2, Retry: retry.PolicyFunc(func(int) time.Duration { return 100 * time.Millisecond })},
		Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: 100 * time.Millisecond}}, r)

	newEvent := func() core.Envelope {
		env, err := core.NewEvent("a.b").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	first := newEvent()
	relaytest.Publish(t, ob, first)
	testsupport.WaitFor(t, 30*time.Second, "the first event in the queue and DONE", func() bool {
		return got.count() >= 1 && relaytest.Counts(t, ob)[core.StatusDone] == 1
	}, got.wake)

	remove := blackhole(t, proxy)
	ids := []string{first.ID()}
	for range 4 {
		env := newEvent()
		relaytest.Publish(t, ob, env)
		ids = append(ids, env.ID())
	}
	putOffs := func(id string) int { return logs.Count("event put off without charging an attempt", "event_id="+id) }
	testsupport.WaitFor(t, 60*time.Second, "each event put off twice during the blackhole (or one DEAD)", func() bool {
		if relaytest.Counts(t, ob)[core.StatusDead] > 0 {
			return true
		}
		for _, id := range ids[1:] {
			if putOffs(id) < 2 {
				return false
			}
		}
		return true
	})
	if c := relaytest.Counts(t, ob); c[core.StatusDead] != 0 || c[core.StatusRetry] != 0 {
		t.Errorf("statuses during the blackhole: %v, want none DEAD or RETRY", c)
	}
	for _, id := range ids[1:] {
		rec, err := ob.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Attempts != 0 {
			t.Errorf("event %s: %d attempts during the blackhole, want 0", id, rec.Attempts)
		}
	}
	if logs.Count("level=ERROR", "broker unreachable", "no publisher confirm in time") != 1 {
		t.Errorf("want one ERROR line naming the missing confirm:\n%s", strings.Join(logs.Lines("level=ERROR"), "\n"))
	}
	if t.Failed() {
		remove()
		t.FailNow()
	}
	remove()

	testsupport.WaitFor(t, 60*time.Second, "the recovery reported", func() bool { return logs.Count("level=INFO", "broker recovered") > 0 })
	waitAllRelayed(t, ob, got, ids)
	if c := relaytest.Counts(t, ob); c[core.StatusDead] != 0 || c[core.StatusRetry] != 0 {
		t.Errorf("statuses after the blackhole: %v", c)
	}
	if down, up := logs.Count("level=ERROR", "broker unreachable"), logs.Count("level=INFO", "broker recovered"); down != 1 || up != 1 {
		t.Errorf("%d ERROR lines and %d recovered lines, want 1 and 1", down, up)
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
}

// Channels open lazily, so the first publish on a slot during a blackhole
// opens its channel then, and the broker never answers. The publish still
// returns when its ctx ends, as an outage (it used to wait for the
// client's heartbeat timeout, about 15 s, whatever its ctx), and Close
// returns within its ctx although that open is still under way (it used
// to wait for it under the slot's lock).
func TestRelayBlackholeChannelOpen(t *testing.T) {
	ex, _ := routedExchange(t)
	proxy, proxied := faultProxy(t)
	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{URL: proxied, Exchange: ex, Channels: 2, Logger: logger,
		Breaker: relay.BreakerConfig{ProbeInterval: 100 * time.Millisecond}})
	env, err := core.JSONEvent("a.b", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), env); err != nil { // opens one of the two channels
		t.Fatal(err)
	}
	remove := blackhole(t, proxy)
	defer remove()

	const onEventTimeout = time.Second
	onEvent := make(chan error, 1)
	started := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), onEventTimeout)
		defer cancel()
		onEvent <- r.OnEvent(ctx, env) // opens the other channel
	}()
	returned := false
	select {
	case err := <-onEvent:
		returned = true
		var ue *core.UnavailableError
		if !errors.As(err, &ue) {
			t.Errorf("OnEvent whose ctx ended opening a channel = %v, want a core.Unavailable error", err)
		}
		t.Logf("OnEvent with a %v ctx returned after %v: %v", onEventTimeout, time.Since(started).Round(time.Millisecond), err)
	case <-time.After(onEventTimeout + time.Second):
		t.Errorf("OnEvent with a %v ctx still running after %v", onEventTimeout, onEventTimeout+time.Second)
	}

	const closeTimeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	closed := make(chan error, 1)
	started = time.Now()
	go func() { closed <- r.Close(ctx) }()
	select {
	case err := <-closed:
		t.Logf("Close with a %v ctx returned after %v: %v", closeTimeout, time.Since(started).Round(time.Millisecond), err)
	case <-time.After(closeTimeout + time.Second):
		t.Errorf("Close with a %v ctx still running after %v", closeTimeout, closeTimeout+time.Second)
		<-closed
	}
	if !returned {
		<-onEvent
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
}

// Close whose ctx ends while the broker has not answered the close (a
// blackholed connection, nothing in flight) returns ctx's error, as it
// documents: it returned nil, as if the broker had closed cleanly.
func TestRelayCloseBlackholedReturnsCtxError(t *testing.T) {
	ex, _ := routedExchange(t)
	for _, publish := range []bool{false, true} {
		proxy, proxied := faultProxy(t)
		r, err := rabbitmq.New(t.Context(), rabbitmq.Config{URL: proxied, Exchange: ex})
		if err != nil {
			t.Fatal(err)
		}
		if publish { // a channel open too
			env, err := core.JSONEvent("a.b", `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.OnEvent(context.Background(), env); err != nil {
				t.Fatal(err)
			}
		}
		remove := blackhole(t, proxy)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close over a blackholed connection (a channel open: %v) = %v, want context.DeadlineExceeded", publish, err)
		}
		cancel()
		remove()
	}
}
