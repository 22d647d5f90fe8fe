package rabbitmq_test

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// outageWorkers is the dispatcher workers of the outage test: at most that
// many publishes are under way when the connection is cut.
const outageWorkers = 8

// faultProxy runs a Toxiproxy TCP proxy in the test process in front of
// the shared broker, and returns it with the AMQP URL that goes through
// it. Stopping the proxy cuts every connection through it and refuses new
// ones; the shared broker is never touched.
func faultProxy(t *testing.T) (*toxiproxy.Proxy, string) {
	t.Helper()
	uri, err := amqp.ParseURI(amqpURL())
	if err != nil {
		t.Fatal(err)
	}
	upstream := net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "amqp-"+uniq(), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	u, err := url.Parse(amqpURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Listen // the port the proxy got
	return p, u.String()
}

// The key proof: the connection to the broker is cut for a few seconds
// while events are committed continuously. Events committed before,
// during and after the cut all reach the queue, every row ends DONE with
// 0 attempts (none DEAD), and the log has one ERROR for the outage and
// one "recovered" line.
func TestRelayOutage(t *testing.T) {
	ex, got := consumedExchange(t)
	proxy, proxied := faultProxy(t)

	logger, logs := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	r := newRelay(t, rabbitmq.Config{URL: proxied, Exchange: ex, ConfirmTimeout: time.Second, Logger: logger, Metrics: m,
		ReconnectDelay: 50 * time.Millisecond, ReconnectMaxDelay: 200 * time.Millisecond,
		Breaker: relay.BreakerConfig{ProbeInterval: 100 * time.Millisecond, RetryAfter: 200 * time.Millisecond}})
	ob := relaytest.Outbox(t, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{Workers: outageWorkers},
		Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: 100 * time.Millisecond}}, r)

	// The publisher commits an event every few milliseconds until stopped.
	pub := relaytest.StartPublisher(t, ob, 3*time.Millisecond)

	testsupport.WaitFor(t, 30*time.Second, "events in the queue before the cut", func() bool { return got.count() >= 50 }, got.wake)

	proxy.Stop() // cuts the relay's connection, refuses its redials
	atCut := pub.Count()
	outage := time.After(4 * time.Second) // how long the cut lasts, not a synchronization
	testsupport.WaitFor(t, 30*time.Second, "the outage reported", func() bool { return logs.Count("level=ERROR", "broker unreachable") > 0 })
	<-outage
	testsupport.WaitFor(t, 30*time.Second, "events committed during the cut", func() bool { return pub.Count() >= atCut+100 })

	atRestore := pub.Count()
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 60*time.Second, "the recovery reported", func() bool { return logs.Count("level=INFO", "broker recovered") > 0 })
	ids, stored, dups := afterOutage(t, ob, got, pub, logs)
	if len(stored) != len(ids) {
		t.Errorf("%d distinct ids in the queue, %d committed", len(stored), len(ids))
	}
	// A message whose confirm the cut swallowed is published again (at
	// least once; consumers deduplicate on message_id): at most one per
	// worker, the publishes under way when the connection went.
	if dups > outageWorkers {
		t.Errorf("%d duplicates in the queue, want at most %d (the publishes under way at the cut)", dups, outageWorkers)
	}
	if got, want := m.All(), []string{"up=true", "full=0", "up=false", "up=true"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q (one outage)", got, want)
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
		return
	}
	t.Logf("%d events committed, %d during the cut, %d redelivered duplicates\n%s\n%s", len(ids), atRestore-atCut, dups,
		logs.Lines("broker unreachable")[0], logs.Lines("broker recovered")[0])
}
