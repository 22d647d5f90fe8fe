package relaytest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/relay"
)

// Metrics is a relay.Metrics that records its calls in order, as
// "up=true", "up=false" and "full=N", and the brokers named.
type Metrics struct {
	mu      sync.Mutex
	calls   []string
	brokers []string
}

var _ relay.Metrics = (*Metrics)(nil)

// BrokerUp records "up=<up>".
func (m *Metrics) BrokerUp(broker string, up bool) { m.record(broker, fmt.Sprintf("up=%v", up)) }

// FullDestinations records "full=<n>".
func (m *Metrics) FullDestinations(broker string, n int) { m.record(broker, fmt.Sprintf("full=%d", n)) }

func (m *Metrics) record(broker, call string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, call)
	if !slices.Contains(m.brokers, broker) {
		m.brokers = append(m.brokers, broker)
	}
}

// All returns the calls recorded so far.
func (m *Metrics) All() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// Take returns the calls recorded since the last Take and forgets them.
func (m *Metrics) Take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.calls
	m.calls = nil
	return c
}

// Brokers returns the brokers named so far, in their first call's order.
func (m *Metrics) Brokers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.brokers)
}

// Full returns relay.NewFull(cfg), failing t on an error.
func Full(t testing.TB, cfg relay.FullConfig) *relay.Full {
	t.Helper()
	f, err := relay.NewFull(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
