package relay_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
)

// recordMetrics records the relay.Metrics calls in order.
type recordMetrics struct {
	mu    sync.Mutex
	calls []string
}

func (m *recordMetrics) BrokerUp(broker string, up bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, fmt.Sprintf("%s up=%v", broker, up))
}

func (m *recordMetrics) FullDestinations(broker string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, fmt.Sprintf("%s full=%d", broker, n))
}

func (m *recordMetrics) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.calls
	m.calls = nil
	return c
}

// The breaker reports the broker up when created, down once per outage
// (not at each failure within it) and up once when it ends.
func TestBreakerMetrics(t *testing.T) {
	m := &recordMetrics{}
	logger, _ := testsupport.NewLogger()
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "b", Logger: logger, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.take(); !slices.Equal(got, []string{"b up=true"}) {
		t.Fatalf("at creation: %q", got)
	}
	_ = b.Down(errors.New("x"))
	_ = b.Down(errors.New("y"))
	b.Up()
	b.Up()
	if got, want := m.take(), []string{"b up=false", "b up=true"}; !slices.Equal(got, want) {
		t.Fatalf("an outage: %q, want %q", got, want)
	}
}

// Full reports 0 when created, then the number of full destinations at
// each incident's start and end.
func TestFullMetrics(t *testing.T) {
	m := &recordMetrics{}
	logger, _ := testsupport.NewLogger()
	f := relay.NewFull(relay.FullConfig{Name: "b", Logger: logger, Metrics: m})
	name := func(n string) func() string { return func() string { return n } }
	_ = f.Refused("k1", errors.New("full"), name("q1"))
	_ = f.Refused("k1", errors.New("full"), name("q1"))
	_ = f.Refused("k2", errors.New("full"), name("q1"))
	_ = f.Refused("k3", errors.New("full"), name("q2"))
	f.Accepted("k1")
	f.Accepted("k2")
	f.Accepted("k3")
	want := []string{"b full=0", "b full=1", "b full=2", "b full=1", "b full=0"}
	if got := m.take(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Retire reports the broker up and no destination full, once, and
// nothing after: a closed relay's alerts end.
func TestRetireMetrics(t *testing.T) {
	m := &recordMetrics{}
	logger, _ := testsupport.NewLogger()
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "b", Logger: logger, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	f := relay.NewFull(relay.FullConfig{Name: "b", Logger: logger, Metrics: m})
	_ = b.Down(errors.New("x"))
	_ = f.Refused("k", errors.New("full"), func() string { return "q" })
	m.take()
	b.Retire()
	f.Retire()
	b.Retire()
	f.Retire()
	if got, want := m.take(), []string{"b up=true", "b full=0"}; !slices.Equal(got, want) {
		t.Fatalf("Retire: %q, want %q", got, want)
	}
	b.Up()
	_ = b.Down(errors.New("y"))
	_ = f.Refused("k2", errors.New("full"), func() string { return "q2" })
	f.Accepted("k")
	if got := m.take(); len(got) != 0 {
		t.Fatalf("after Retire: %q, want nothing", got)
	}
}
