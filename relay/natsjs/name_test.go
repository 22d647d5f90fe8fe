package natsjs_test

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// brokerOf returns the broker name a relay over nc reports its metrics
// under (its default breaker name).
func brokerOf(t *testing.T, nc *nats.Conn) string {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := &relaytest.Metrics{}
	if _, err := natsjs.New(js, natsjs.Config{Subject: "outbox.{type}", Metrics: m}); err != nil {
		t.Fatal(err)
	}
	b := m.Brokers()
	if len(b) != 1 {
		t.Fatalf("brokers named %q, want one", b)
	}
	return b[0]
}

// The default broker name is the server's address without credentials
// (the user name was kept, so two relays to one server as two users had
// two names and a user name reached labels and logs), also when the
// connection is not up yet (the name had no address then).
func TestDefaultBrokerNameLeavesCredentialsOut(t *testing.T) {
	connect(t) // skips, or fails on CI, without a server
	u, err := url.Parse(natsURL())
	if err != nil {
		t.Fatal(err)
	}
	want := "nats jetstream nats://" + u.Host
	var names []string
	for _, user := range []*url.Userinfo{nil, url.UserPassword("alice", "secret"), url.User("tok3n")} {
		withUser := *u
		withUser.User = user
		nc, err := nats.Connect(withUser.String(), nats.Timeout(2*time.Second))
		if err != nil {
			t.Fatalf("connect as %v: %v", user, err)
		}
		t.Cleanup(nc.Close)
		names = append(names, brokerOf(t, nc))
	}
	if slices.ContainsFunc(names, func(n string) bool { return n != want }) {
		t.Fatalf("broker names %q, want %q for each", names, want)
	}

	// A server not up yet: the connection keeps trying.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	nc, err := nats.Connect("nats://bob:pw@"+addr, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if got, want := brokerOf(t, nc), "nats jetstream nats://"+addr; got != want {
		t.Fatalf("broker name before the connection is up = %q, want %q", got, want)
	}
}
