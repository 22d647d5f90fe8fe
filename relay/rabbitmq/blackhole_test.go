package rabbitmq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// blackhole makes proxy drop every byte in both directions without
// closing a connection (Toxiproxy's timeout toxic with timeout 0), like a
// peer that vanished from the network; the returned func removes the
// toxics again.
func blackhole(t *testing.T, proxy *toxiproxy.Proxy) (remove func()) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		spec := `{"name":"blackhole-` + stream + `","type":"timeout","stream":"` + stream + `","attributes":{"timeout":0}}`
		if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			t.Fatalf("add the %s blackhole: %v", stream, err)
		}
	}
	return func() {
		for _, stream := range []string{"upstream", "downstream"} {
			if err := proxy.Toxics.RemoveToxic(context.Background(), "blackhole-"+stream); err != nil {
				t.Errorf("remove the %s blackhole: %v", stream, err)
			}
		}
	}
}

// A blackholed connection: the TCP connection stays up but nothing gets
// through, so publishes are written and their confirms never come. Each
// one waits ConfirmTimeout and is put off as an outage (no attempt
// charged, no event DEAD) while events keep being committed; once the
// toxics are removed the relay is back (the broken stream closes the
// connection, the relay dials again) and every event reaches the queue
// and ends DONE with 0 attempts. The log has one ERROR for the outage,
// naming the missing confirm, and one "recovered" line.
func TestRelayBlackhole(t *testing.T) {
	ch := admin(t)
	ex := newExchange(t, ch)
	q := newQueue(t, ch, ex, "#")
	got := consume(t, q)
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
