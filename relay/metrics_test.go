package relay_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
)

// The breaker reports the broker up when created, down once per outage
// (not at each failure within it) and up once when it ends.
func TestBreakerMetrics(t *testing.T) {
	m := &relaytest.Metrics{}
	logger, _ := testsupport.NewLogger()
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "b", Logger: logger, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Take(); !slices.Equal(got, []string{"up=true"}) {
		t.Fatalf("at creation: %q", got)
	}
	_ = b.Down(errors.New("x"))
	_ = b.Down(errors.New("y"))
	b.Up()
	b.Up()
	if got, want := m.Take(), []string{"up=false", "up=true"}; !slices.Equal(got, want) {
		t.Fatalf("an outage: %q, want %q", got, want)
	}
	if got := m.Brokers(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("brokers named %q, want the breaker's name", got)
	}
}

// Full reports 0 when created, then the number of full destinations at
// each incident's start and end.
func TestFullMetrics(t *testing.T) {
	m := &relaytest.Metrics{}
	logger, _ := testsupport.NewLogger()
	f := relaytest.Full(t, relay.FullConfig{Name: "b", Logger: logger, Metrics: m})
	name := func(n string) func() string { return func() string { return n } }
	_ = f.Refused("k1", errors.New("full"), name("q1"))
	_ = f.Refused("k1", errors.New("full"), name("q1"))
	_ = f.Refused("k2", errors.New("full"), name("q1"))
	_ = f.Refused("k3", errors.New("full"), name("q2"))
	f.Accepted("k1")
	f.Accepted("k2")
	f.Accepted("k3")
	want := []string{"full=0", "full=1", "full=2", "full=1", "full=0"}
	if got := m.Take(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Retire reports the broker up and no destination full, once, and
// nothing after: a closed relay's alerts end.
func TestRetireMetrics(t *testing.T) {
	m := &relaytest.Metrics{}
	logger, _ := testsupport.NewLogger()
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "b", Logger: logger, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	f := relaytest.Full(t, relay.FullConfig{Name: "b", Logger: logger, Metrics: m})
	_ = b.Down(errors.New("x"))
	_ = f.Refused("k", errors.New("full"), func() string { return "q" })
	m.Take()
	b.Retire()
	f.Retire()
	b.Retire()
	f.Retire()
	if got, want := m.Take(), []string{"up=true", "full=0"}; !slices.Equal(got, want) {
		t.Fatalf("Retire: %q, want %q", got, want)
	}
	b.Up()
	_ = b.Down(errors.New("y"))
	_ = f.Refused("k2", errors.New("full"), func() string { return "q2" })
	f.Accepted("k")
	if got := m.Take(); len(got) != 0 {
		t.Fatalf("after Retire: %q, want nothing", got)
	}
}

// Once retired (its relay closing), an outage the publishes under way
// find (the relay's own connection closing under them) logs no ERROR and
// no "recovered" INFO, only DEBUG lines; the events are still put off.
func TestRetiredBreakerLogsNoOutage(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "b", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	b.Retire()
	var ue *core.UnavailableError
	if err := b.Down(errors.New("connection closed")); !errors.As(err, &ue) {
		t.Fatalf("Down after Retire = %v, want the event put off", err)
	}
	b.Up()
	if n := logs.Count("level=ERROR") + logs.Count("level=INFO"); n != 0 {
		t.Fatalf("%d ERROR/INFO lines after Retire, want none:\n%s", n, logs)
	}
	if n := logs.Count("level=DEBUG"); n != 2 {
		t.Errorf("%d DEBUG lines, want 2:\n%s", n, logs)
	}
}

// A Breaker's Full is named, logs and reports as the Breaker.
func TestBreakerNewFull(t *testing.T) {
	m := &relaytest.Metrics{}
	logger, logs := testsupport.NewLogger()
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "b", Logger: logger, Metrics: m, RetryAfter: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := b.NewFull("queue full")
	var ue *core.UnavailableError
	if err := f.Refused("k", errors.New("nacked"), func() string { return "q" }); !errors.As(err, &ue) || ue.After != 3*time.Second {
		t.Fatalf("Refused = %v, want put off for the Breaker's RetryAfter", err)
	}
	if got, want := m.Take(), []string{"up=true", "full=0", "full=1"}; !slices.Equal(got, want) || !slices.Equal(m.Brokers(), []string{"b"}) {
		t.Errorf("metrics %q of %q, want %q of the Breaker's name", got, m.Brokers(), want)
	}
	if n := logs.Count("level=ERROR", "queue full", "broker=b"); n != 1 {
		t.Errorf("want the ERROR line under the Breaker's name:\n%s", logs)
	}
}
