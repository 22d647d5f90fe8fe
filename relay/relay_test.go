package relay_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
)

func event(t *testing.T) core.Envelope {
	t.Helper()
	env, err := core.NewEvent("OrderPlaced").ID("ev-1").AggregateType("Order").AggregateID("42").TenantID("acme").
		Header("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").
		PayloadJSONString(`{"n":1}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestTemplateExpand(t *testing.T) {
	env := event(t)
	for src, want := range map[string]string{
		"orders":        "orders",
		"":              "",
		"events.{type}": "events.OrderPlaced",
		"{tenant}.{aggregate_type}.{aggregate_id}": "acme.Order.42",
		"x{id}y": "xev-1y",
	} {
		tpl, err := relay.ParseTemplate(src)
		if err != nil {
			t.Fatalf("ParseTemplate(%q): %v", src, err)
		}
		if got := tpl.Expand(env); got != want {
			t.Errorf("%q expands to %q, want %q", src, got, want)
		}
		if tpl.String() != src {
			t.Errorf("String() = %q, want %q", tpl.String(), src)
		}
	}
	if !relay.MustParseTemplate("a.b").Static() || relay.MustParseTemplate("a.{type}").Static() {
		t.Error("Static is wrong")
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, src := range []string{"{typ}", "a.{type", "a}", "{}", "{{type}}", "{Type}"} {
		_, err := relay.ParseTemplate(src)
		if !errors.Is(err, relay.ErrInvalidTemplate) {
			t.Errorf("ParseTemplate(%q) = %v, want ErrInvalidTemplate", src, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("MustParseTemplate did not panic")
		}
	}()
	relay.MustParseTemplate("{nope}")
}

func TestHeaders(t *testing.T) {
	got := map[string]string{}
	relay.Headers(event(t), func(k, v string) { got[k] = v })
	want := map[string]string{
		relay.HeaderEventID: "ev-1", relay.HeaderEventType: "OrderPlaced", relay.HeaderAggregateType: "Order",
		relay.HeaderAggregateID: "42", relay.HeaderTenant: "acme", relay.HeaderContentType: "application/json",
		"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, got[relay.HeaderOccurredAt]); err != nil {
		t.Errorf("occurred-at %q: %v", got[relay.HeaderOccurredAt], err)
	}
	if _, ok := got[relay.HeaderOrderKey]; ok {
		t.Error("an unordered event carries an order key header")
	}
	bare, err := core.NewEvent("Ping").PayloadBytes([]byte{1}).Build()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	relay.Headers(bare, func(k, v string) {
		n++
		if v == "" {
			t.Errorf("empty header %s", k)
		}
	})
	if n != 3 { // id, type, occurred-at
		t.Errorf("%d headers for a bare event, want 3", n)
	}
}

// The metadata is the relay's: an event header named like a metadata
// header, in any case, is dropped, and the metadata is set after the
// event's headers. Content-Type is the relay's for a JSON payload only.
func TestHeadersMetadataWins(t *testing.T) {
	env, err := core.NewEvent("OrderPlaced").ID("ev-1").
		Header(relay.HeaderEventID, "copied").Header("OUTBOX-TENANT", "spoof").Header("outbox-order-key", "k").
		Header("content-type", "text/plain").Header("x-own", "kept").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	got := map[string]string{}
	relay.Headers(env, func(k, v string) {
		if _, dup := got[k]; dup {
			t.Errorf("header %s set twice", k)
		}
		got[k] = v
		order = append(order, k)
	})
	want := map[string]string{relay.HeaderEventID: "ev-1", relay.HeaderEventType: "OrderPlaced",
		relay.HeaderContentType: "application/json", "x-own": "kept"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"OUTBOX-TENANT", relay.HeaderTenant, "outbox-order-key", relay.HeaderOrderKey, "content-type"} {
		if v, ok := got[k]; ok {
			t.Errorf("header %s = %q travels", k, v)
		}
	}
	if order[0] != "x-own" {
		t.Errorf("headers set in the order %q, want the event's first", order)
	}

	bytesEvent, err := core.NewEvent("Blob").Header("content-type", "application/protobuf").PayloadBytes([]byte{1}).Build()
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]string{}
	relay.Headers(bytesEvent, func(k, v string) { got[k] = v })
	if got["content-type"] != "application/protobuf" || got[relay.HeaderContentType] != "" {
		t.Errorf("a bytes event's own Content-Type: %q", got)
	}

	for name, want := range map[string]bool{
		relay.HeaderEventID: true, "outbox-event-id": true, "CONTENT-TYPE": true, relay.HeaderOrderKey: true,
		"Outbox-Event-Ids": false, "Outbox-Encoded-Headers": false, "traceparent": false, "": false,
	} {
		if got := relay.IsMetadataHeader(name); got != want {
			t.Errorf("IsMetadataHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestBreaker(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	logs := &testsupport.LogBuffer{}
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: "nats", ProbeInterval: time.Second, RetryAfter: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	settle := relay.ManualSettle(b)
	if err := b.Allow(); err != nil {
		t.Fatalf("Allow before any outage: %v", err)
	}
	b.Up() // no outage: nothing logged
	cause := errors.New("connection refused")
	err = b.Down(cause)
	var ue *core.UnavailableError
	if !errors.As(err, &ue) || ue.After != 3*time.Second || !errors.Is(err, cause) {
		t.Fatalf("Down returned %v", err)
	}
	_ = b.Down(cause) // a second worker failing at the same time: still one ERROR
	if down, since := b.State(); !down || !since.Equal(clk.Now()) {
		t.Fatalf("State = %v %v", down, since)
	}
	for range 5 {
		if err := b.Allow(); !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, cause) {
			t.Fatalf("Allow during the outage = %v", err)
		}
	}
	clk.Advance(time.Second)
	if err := b.Allow(); err != nil {
		t.Fatalf("the probe was refused: %v", err)
	}
	if err := b.Allow(); err == nil {
		t.Fatal("a second probe in the same interval was let through")
	}
	_ = b.Down(cause) // the probe failed
	clk.Advance(time.Second)
	if err := b.Allow(); err != nil {
		t.Fatalf("the next probe was refused: %v", err)
	}
	clk.Advance(500 * time.Millisecond)
	b.Up()
	if err := b.Allow(); err != nil {
		t.Fatalf("Allow after recovery: %v", err)
	}
	if down, _ := b.State(); down {
		t.Fatal("still down after Up")
	}
	if n := logs.Count("recovered"); n != 0 {
		t.Fatalf("%d recovered lines before Settle passed, want 0:\n%s", n, logs)
	}
	clk.Advance(time.Hour) // the line tells when the outage ended, not when it was written
	if n := settle(); n != 1 {
		t.Fatalf("%d settle timers armed by one recovery, want 1", n)
	}
	if n := len(logs.Lines("level=ERROR", "broker unreachable", "broker=nats", "connection refused")); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
	}
	rec := logs.Lines("level=INFO", "broker recovered", "broker=nats", "outage=2.5s", "outages=1", "put_offs=9")
	if len(rec) != 1 {
		t.Errorf("recovered line missing or wrong:\n%s", logs)
	}
	if strings.Count(logs.String(), "\n") != 2 {
		t.Errorf("want exactly 2 lines:\n%s", logs)
	}
}

// An answer to a publish that was under way when an outage began does not
// end it (it was received before the failure was seen); an answer to a
// publish started during the outage, such as its probe, does.
func TestBreakerAttempt(t *testing.T) {
	logs := &testsupport.LogBuffer{}
	b, err := relay.NewBreaker(relay.BreakerConfig{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	settle := relay.ManualSettle(b)
	before := b.Attempt() // under way, no outage yet
	_ = b.Down(errors.New("connection lost"))
	before.Up()
	if down, _ := b.State(); !down {
		t.Fatal("an answer to a publish started before the outage ended it")
	}
	_ = b.Down(errors.New("still down"))
	during := b.Attempt() // started during the outage
	b.Attempt().Up()      // the probe's answer ends it
	if down, _ := b.State(); down {
		t.Fatal("an answer to a publish started during the outage did not end it")
	}
	settle()
	if n := len(logs.Lines("level=INFO", "broker recovered")); n != 1 {
		t.Errorf("%d recovered lines, want 1:\n%s", n, logs)
	}
	_ = b.Down(errors.New("second"))
	during.Up() // started in the first outage
	if down, _ := b.State(); !down {
		t.Error("an answer to a publish started in an earlier outage ended a later one")
	}
	b.Attempt().Up()
	settle()
	if n := len(logs.Lines("level=ERROR")); n != 2 {
		t.Errorf("%d ERROR lines, want 2 (one per outage):\n%s", n, logs)
	}
}

// The failure of a publish under way when an outage ended belongs to that
// outage: it puts the event off and begins no second one. The failure of
// a publish started after the recovery begins one, and so does a failure
// seen now (Breaker.Down), whenever the publishes under way started.
func TestBreakerAttemptDown(t *testing.T) {
	logs := &testsupport.LogBuffer{}
	b, err := relay.NewBreaker(relay.BreakerConfig{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	settle := relay.ManualSettle(b)
	before := b.Attempt() // under way, no outage yet
	probe := func() relay.Attempt {
		_ = b.Attempt().Down(errors.New("no ack")) // begins the outage
		during := b.Attempt()
		b.Attempt().Up() // the probe's ack ends it
		return during
	}
	during := probe()
	for name, a := range map[string]relay.Attempt{"before the outage": before, "during it": during} {
		var ue *core.UnavailableError
		if err := a.Down(errors.New("late timeout")); !errors.As(err, &ue) {
			t.Errorf("late failure of a publish started %s: %v, want a core.Unavailable error", name, err)
		}
		if down, _ := b.State(); down {
			t.Fatalf("the late failure of a publish started %s began a new outage", name)
		}
	}
	settle()
	if down, up := logs.Count("level=ERROR"), logs.Count("level=INFO", "broker recovered"); down != 1 || up != 1 {
		t.Errorf("%d ERROR and %d recovered lines, want 1 and 1:\n%s", down, up, logs)
	}

	after := b.Attempt() // started after the recovery
	_ = after.Down(errors.New("no ack again"))
	if down, _ := b.State(); !down {
		t.Error("the failure of a publish started after the recovery began no outage")
	}
	b.Attempt().Up()
	settle()
	_ = b.Down(errors.New("connection closed")) // seen now
	if down, _ := b.State(); !down {
		t.Error("Breaker.Down after a recovery began no outage")
	}
	if n := logs.Count("level=ERROR"); n != 3 {
		t.Errorf("%d ERROR lines, want 3 (one per outage):\n%s", n, logs)
	}
}

func TestBreakerConfig(t *testing.T) {
	if _, err := relay.NewBreaker(relay.BreakerConfig{Logger: new(slog.Logger)}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Logger") {
		t.Errorf("zero Logger: %v", err)
	}
	if _, err := relay.NewBreaker(relay.BreakerConfig{ProbeInterval: -1}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("negative ProbeInterval: %v", err)
	}
	if _, err := relay.NewBreaker(relay.BreakerConfig{RetryAfter: -1}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("negative RetryAfter: %v", err)
	}
	b, err := relay.NewBreaker(relay.BreakerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var ue *core.UnavailableError
	if !errors.As(b.Down(errors.New("x")), &ue) || ue.After != relay.DefaultRetryAfter {
		t.Errorf("default RetryAfter not applied: %+v", ue)
	}
}
