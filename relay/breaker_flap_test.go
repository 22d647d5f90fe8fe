package relay_test

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
)

// newFlapBreaker returns a Breaker logging into logs, on clk, with manual
// settle timers.
func newFlapBreaker(t *testing.T, clk *testsupport.Clock, logs *testsupport.LogBuffer, m *relaytest.Metrics) (*relay.Breaker, func() int) {
	t.Helper()
	cfg := relay.BreakerConfig{Name: "amqp", ProbeInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Now: clk.Now}
	if m != nil {
		cfg.Metrics = m
	}
	b, err := relay.NewBreaker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, relay.ManualSettle(b)
}

// A link that fails and recovers every few seconds (a latency straddling
// the relay's ack timeout) is one incident: one ERROR, one "recovered"
// line once it stayed up for Settle, counting its outages and put-offs;
// each outage still ends at the first success and shows in the metrics.
func TestBreakerFlapsAreOneIncident(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	logs := &testsupport.LogBuffer{}
	m := &relaytest.Metrics{}
	b, settle := newFlapBreaker(t, clk, logs, m)
	for i := range 3 {
		_ = b.Down(errors.New("confirm timeout"))
		_ = b.Allow() // put off
		clk.Advance(time.Second)
		b.Up()
		if down, _ := b.State(); down {
			t.Fatalf("flap %d: the success did not end the outage", i)
		}
		clk.Advance(2 * time.Second)
	}
	if n := logs.Count("level=ERROR", "broker unreachable"); n != 1 {
		t.Errorf("%d ERROR lines for one flapping incident, want 1:\n%s", n, logs)
	}
	if n := logs.Count("level=DEBUG", "unreachable again"); n != 2 {
		t.Errorf("%d DEBUG lines for the outages continuing the incident, want 2:\n%s", n, logs)
	}
	if n := logs.Count("recovered"); n != 0 {
		t.Fatalf("a recovered line before Settle passed:\n%s", logs)
	}
	// Three timers were armed; the first two were stopped by the outages
	// after them: firing them anyway (a timer firing as it is stopped)
	// logs nothing, the last logs the incident.
	if n := settle(); n != 3 {
		t.Fatalf("%d settle timers armed by three recoveries, want 3", n)
	}
	rec := logs.Lines("level=INFO", "broker recovered", "broker=amqp", "outages=3", "put_offs=6")
	if len(rec) != 1 {
		t.Fatalf("want one recovered line for the incident with outages=3 put_offs=6:\n%s", logs)
	}
	if logs.Count("broker recovered", "outage=7s") != 1 {
		t.Errorf("recovered line lacks outage=7s, the incident's length from its first failure to its last recovery:\n%s", logs)
	}
	want := []string{"up=true", "up=false", "up=true", "up=false", "up=true", "up=false", "up=true"}
	if got := m.Take(); !slices.Equal(got, want) {
		t.Errorf("broker states reported %q, want %q (every outage)", got, want)
	}
	// An outage after the incident settled is a new incident.
	_ = b.Down(errors.New("connection refused"))
	if n := logs.Count("level=ERROR", "broker unreachable"); n != 2 {
		t.Errorf("%d ERROR lines after a second incident began, want 2:\n%s", n, logs)
	}
}

// Retire logs the "recovered" line of an incident waiting for Settle at
// once, so a relay closed right after an outage leaves no incident open
// in the log, and no timer logs it again later.
func TestBreakerRetireLogsPendingRecovery(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	logs := &testsupport.LogBuffer{}
	b, settle := newFlapBreaker(t, clk, logs, nil)
	_ = b.Down(errors.New("connection reset"))
	clk.Advance(1500 * time.Millisecond)
	b.Up()
	b.Retire()
	if n := len(logs.Lines("level=INFO", "broker recovered", "outage=1.5s", "outages=1")); n != 1 {
		t.Fatalf("%d recovered lines after Retire, want 1:\n%s", n, logs)
	}
	settle()
	b.Retire()
	if n := logs.Count("recovered"); n != 1 {
		t.Errorf("%d recovered lines after the stopped timer fired and Retire ran again, want 1:\n%s", n, logs)
	}
}

// With the real timer, the "recovered" line comes Settle (10
// ProbeIntervals) after the recovery.
func TestBreakerSettleTimer(t *testing.T) {
	logs := &testsupport.LogBuffer{}
	b, err := relay.NewBreaker(relay.BreakerConfig{ProbeInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Settle(); got != 10*time.Millisecond {
		t.Fatalf("Settle = %v, want 10 ProbeIntervals (10ms)", got)
	}
	_ = b.Down(errors.New("connection refused"))
	b.Up()
	testsupport.WaitFor(t, 10*time.Second, "the recovered line", func() bool { return logs.Count("level=INFO", "broker recovered") == 1 })
	if def, err := relay.NewBreaker(relay.BreakerConfig{}); err != nil || def.Settle() != 10*time.Second {
		t.Errorf("default Settle = %v (%v), want 10s", def.Settle(), err)
	}
	if long, err := relay.NewBreaker(relay.BreakerConfig{ProbeInterval: time.Minute}); err != nil || long.Settle() != 30*time.Second {
		t.Errorf("Settle with a 1 min ProbeInterval = %v (%v), want 30s at most", long.Settle(), err)
	}
}

// Retire during an outage ends the incident in the log (it stayed open,
// its ERROR without an end, while the metric said up: an audit); what
// the publishes under way find then logs at DEBUG.
func TestBreakerRetireDuringAnOutage(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	logs := &testsupport.LogBuffer{}
	m := &relaytest.Metrics{}
	b, settle := newFlapBreaker(t, clk, logs, m)
	_ = b.Down(errors.New("confirm timeout"))
	b.Up()
	clk.Advance(time.Second)
	_ = b.Down(errors.New("confirm timeout")) // the incident's second outage, under way at Close
	clk.Advance(time.Second)
	under := b.Attempt()
	b.Retire()
	if n := len(logs.Lines("level=INFO", "closed during a broker outage", "outage=2s", "outages=2", "put_offs=2")); n != 1 {
		t.Fatalf("%d lines ending the incident at Retire, want 1:\n%s", n, logs)
	}
	under.Up() // a publish under way answers after the close
	settle()
	if n := logs.Count("level=INFO"); n != 1 {
		t.Errorf("%d INFO lines, want only the one Retire logged:\n%s", n, logs)
	}
	if got := m.Take(); got[len(got)-1] != "up=true" {
		t.Errorf("broker states %q, want up at the end", got)
	}
}
