package otel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/mattn/go-sqlite3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testsupport"
	obsotel "github.com/outbox-go/outbox/otel"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// natsURL is the shared test server: OUTBOX_TEST_NATS_URL, by default the
// local one.
func natsURL() string {
	if u := os.Getenv("OUTBOX_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// connectNATS connects to the test server, closed in t's Cleanup; it
// skips t without one, or fails it when CI=true.
func connectNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
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

// testStream creates a stream of cfg, its name and subjects set here,
// deleted in t's Cleanup, and returns it with its subjects' prefix.
func testStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, string) {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	prefix := "otel-test-" + id
	cfg.Name, cfg.Subjects = "OTEL_TEST_"+strings.ToUpper(id), []string{prefix + ".>"}
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

// A JetStream relay given the Observer as its Propagator sends each
// message with the delivery span's context: a consumer reading the stream
// extracts it and continues the request's trace.
func TestEndToEndNATSRelayCarriesTheDeliverySpan(t *testing.T) {
	_, js := connectNATS(t)
	st, prefix := testStream(t, js, jetstream.StreamConfig{})
	name := st.CachedInfo().Config.Name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	h := newHarness(t, obsotel.Config{})
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}", Propagator: h.obs})
	if err != nil {
		t.Fatal(err)
	}
	ob := openOutbox(t, h, filepath.Join(t.TempDir(), "ob.db"), outbox.Config{})
	ob.RegisterAll(r)
	if err := ob.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	evID, root := request(t, h, ob, "OrderPlaced")
	testsupport.WaitFor(t, 30*time.Second, "the event DONE", func() bool {
		rec, err := ob.Get(context.Background(), evID)
		return err == nil && rec.Status == core.StatusDone
	})
	if err := ob.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	proc := h.span(t, "process OrderPlaced")
	send := h.span(t, "send OrderPlaced")

	// The stream's consumer side: read the message, extract its context.
	msg, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatalf("read the relayed message: %v", err)
	}
	// nats.Header keys are case-sensitive, unlike http.Header's: a
	// consumer reads them as they were written (lowercase traceparent).
	carrier := propagation.MapCarrier{}
	for k, v := range msg.Header {
		carrier[k] = v[0]
	}
	remote := trace.SpanContextFromContext(w3c.Extract(context.Background(), carrier))
	if remote.TraceID() != root.TraceID() {
		t.Errorf("message's trace %v, want the request's %v", remote.TraceID(), root.TraceID())
	}
	if remote.SpanID() != proc.SpanContext().SpanID() {
		t.Errorf("message carries span %v, want the delivery span %v (not the producer %v)", remote.SpanID(), proc.SpanContext().SpanID(), send.SpanContext().SpanID())
	}
	if got := msg.Header.Values("traceparent"); len(got) != 1 {
		t.Errorf("traceparent values %q, want exactly one", got)
	}
	// The consumer processes it through an inbox observed by the same
	// Observer: its span continues the request's trace under the delivery
	// span that relayed the message.
	db, err := sqlx.Open("sqlite3", filepath.Join(t.TempDir(), "consumer.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	in, err := inbox.New(ctx, db, inbox.Config{Observer: h.obs})
	if err != nil {
		t.Fatal(err)
	}
	consumerCtx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	m := inbox.Message{Source: name, MessageID: msg.Header.Get("Nats-Msg-Id"), Topic: msg.Subject, Payload: msg.Data}
	var inner trace.SpanContext
	if ok, err := in.Process(consumerCtx, m, func(ctx context.Context, _ *sqlx.Tx) error {
		inner = trace.SpanContextFromContext(ctx)
		return nil
	}); !ok || err != nil {
		t.Fatalf("inbox: processed %v, %v", ok, err)
	}
	c := h.span(t, "process "+msg.Subject)
	if c.Parent().SpanID() != proc.SpanContext().SpanID() || c.SpanContext().TraceID() != root.TraceID() {
		t.Errorf("the inbox's span: parent %v in trace %v, want the delivery span in the request's trace", c.Parent().SpanID(), c.SpanContext().TraceID())
	}
	if inner.SpanID() != c.SpanContext().SpanID() {
		t.Errorf("the business function ran under span %v, want the inbox's %v", inner.SpanID(), c.SpanContext().SpanID())
	}
	outcome, _ := attr(c.Attributes(), obsotel.AttrOutcome)
	msgID, _ := attr(c.Attributes(), "messaging.message.id")
	if c.SpanKind() != trace.SpanKindConsumer || outcome.AsString() != "processed" || msgID.AsString() != evID {
		t.Errorf("the inbox's span: kind %v, attributes %v", c.SpanKind(), c.Attributes())
	}
}

// A JetStream relay given the Observer as its Metrics reports its broker,
// named by its server's address: up from its creation, its stream full
// and then taking messages again, an outage once its connection is gone.
func TestNATSRelayReportsItsBroker(t *testing.T) {
	_, admin := connectNATS(t)
	st, prefix := testStream(t, admin, jetstream.StreamConfig{MaxMsgs: 1, Discard: jetstream.DiscardNew})
	nc, js := connectNATS(t) // the relay's own, closed below
	h := newHarness(t, obsotel.Config{})
	clock := testsupport.NewClock(time.Now())
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}", Metrics: h.obs,
		Logger: slog.New(slog.DiscardHandler), Breaker: relay.BreakerConfig{ProbeInterval: time.Hour, Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	broker := brokerLabels("nats jetstream " + nc.ConnectedUrlRedacted())
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, broker, 1)
	wantPoint(t, h, obsotel.MetricRelayOutages, broker, 0)
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, broker, 0)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	send := func(typ string) error {
		env, err := outbox.JSONEvent(typ, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		return r.OnEvent(ctx, env)
	}
	if err := send("A"); err != nil {
		t.Fatalf("the first event: %v", err)
	}
	var unavailable *core.UnavailableError
	if err := send("B"); !errors.As(err, &unavailable) {
		t.Fatalf("an event to the full stream: %v, want it put off", err)
	}
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, broker, 1)
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // the subject's next probe
	if err := send("B"); err != nil {
		t.Fatalf("the event again, the stream purged: %v", err)
	}
	wantPoint(t, h, obsotel.MetricRelayFullDestinations, broker, 0)
	wantPoint(t, h, obsotel.MetricRelayOutages, broker, 0) // a full stream is no outage

	nc.Close()
	if err := send("C"); !errors.As(err, &unavailable) {
		t.Fatalf("an event after the connection closed: %v, want it put off", err)
	}
	wantPoint(t, h, obsotel.MetricRelayBrokerUp, broker, 0)
	wantPoint(t, h, obsotel.MetricRelayOutages, broker, 1)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
