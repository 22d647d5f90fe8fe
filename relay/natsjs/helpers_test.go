package natsjs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// natsURL is the shared test server: OUTBOX_TEST_NATS_URL, by default the
// local one.
func natsURL() string {
	if u := os.Getenv("OUTBOX_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// connect opens a connection to the shared server and closes it in
// Cleanup. Without a server the test skips, or fails when CI=true.
func connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s: %v", natsURL(), err)
		}
		t.Skipf("no NATS at %s (set OUTBOX_TEST_NATS_URL): %v", natsURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// uniq returns a random suffix for stream and subject names.
func uniq() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newStream creates a stream named after the test listening on
// "<prefix>.>", and deletes it in Cleanup. It returns the stream and the
// prefix.
func newStream(t testing.TB, js jetstream.JetStream, mod func(*jetstream.StreamConfig)) (jetstream.Stream, string) {
	t.Helper()
	id := uniq()
	prefix := "natsjs-test-" + id
	cfg := jetstream.StreamConfig{
		Name:       "NATSJS_TEST_" + strings.ToUpper(id),
		Subjects:   []string{prefix + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, cfg.Name); err != nil {
			t.Errorf("delete stream %s: %v", cfg.Name, err)
		}
	})
	return st, prefix
}

// streamMsgs reads every message of st, in stream order.
func streamMsgs(t testing.TB, st jetstream.Stream) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// streamCount returns how many messages st holds.
func streamCount(t testing.TB, st jetstream.Stream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

// aggregateEvent returns an event of type T with aggregate id agg, for a
// relay whose subject template names {aggregate_id}.
func aggregateEvent(t testing.TB, agg string) core.Envelope {
	t.Helper()
	env, err := core.NewEvent("T").AggregateID(agg).PayloadBytes([]byte("x")).Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// nilMetrics is a relay.Metrics whose nil value must be refused.
type nilMetrics struct{ n int }

func (m *nilMetrics) BrokerUp(string, bool)        { m.n++ }
func (m *nilMetrics) FullDestinations(string, int) { m.n++ }

// probingRelay returns a relay on js publishing to subject, its log, its
// metrics and its clock, closed in Cleanup. Its breaker and its full
// destinations probe once an hour on that clock: were the breaker opened,
// other events would be put off; advance the clock for a refused
// subject's next probe.
func probingRelay(t testing.TB, js jetstream.JetStream, subject string) (*natsjs.Relay, *testsupport.LogBuffer, *relaytest.Metrics, *testsupport.Clock) {
	t.Helper()
	logger, logs := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	clock := testsupport.NewClock(time.Now())
	r, err := natsjs.New(js, natsjs.Config{Subject: subject, Logger: logger, Metrics: m,
		Breaker: relay.BreakerConfig{ProbeInterval: time.Hour, Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r, logs, m, clock
}
