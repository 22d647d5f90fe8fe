package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// natsURL is the NATS server of the relay tests: OUTBOX_TEST_NATS_URL, by
// default the local one.
func natsURL() string {
	if u := os.Getenv("OUTBOX_TEST_NATS_URL"); u != "" {
		return u
	}
	return nats.DefaultURL
}

// connectNATS connects to the test server (JetStream enabled) and closes
// the connection in Cleanup. Without a server the test skips, or fails
// when CI=true.
func connectNATS(t *testing.T) jetstream.JetStream {
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("NATS at %s has no JetStream: %v", natsURL(), err)
	}
	return js
}

// TestRunSQLiteRelayTiny runs end_to_end, relay and relay_latency in
// process on SQLite through the natsjs relay to the real local NATS, with
// tiny sizes: the relay lines carry their rate, percentiles, broker and
// notes, the summary relay_ratio and relay_p99_us, and each scenario's
// stream is gone afterwards.
func TestRunSQLiteRelayTiny(t *testing.T) {
	js := connectNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-n", "200", "-rounds", "2", "-warmup", "20",
		"-relay", "natsjs", "-relay-url", natsURL(), "-relay-workers", "8",
		"-scenarios", "end_to_end,relay,relay_latency"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	scenarios := []string{scenarioEndToEnd, scenarioRelay, scenarioRelayLatency}
	if len(lines) != len(scenarios)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(scenarios)+1, out.String())
	}
	want := map[string][]string{
		scenarioRelay:        {"events_per_s", "cpu_us_per_event", "hot_dropped", "cold_enqueued"},
		scenarioRelayLatency: {"events_per_s", "target_events_per_s", "p50_us", "p90_us", "p99_us", "max_us"},
	}
	var streams []string
	for i, name := range scenarios {
		var m struct {
			Scenario string   `json:"scenario"`
			N        int      `json:"n"`
			Workers  int      `json:"workers"`
			Relay    string   `json:"relay"`
			Notes    []string `json:"notes"`
			Rounds   []float64
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil || json.Unmarshal([]byte(lines[i]), &fields) != nil {
			t.Fatalf("line %d does not parse: %v\n%s", i+1, err, lines[i])
		}
		if m.Scenario != name {
			t.Errorf("line %d: scenario=%v, want %s", i+1, m.Scenario, name)
		}
		for _, f := range want[name] {
			if _, ok := fields[f].(float64); !ok {
				t.Errorf("%s: field %q missing or not a number: %s", name, f, lines[i])
			}
		}
		if name == scenarioEndToEnd {
			if m.Relay != "" || m.Workers != defaultWorkers {
				t.Errorf("end_to_end: relay=%q workers=%d, want none and %d: %s", m.Relay, m.Workers, defaultWorkers, lines[i])
			}
			continue
		}
		if m.Relay != "natsjs" || m.Workers != 8 {
			t.Errorf("%s: relay=%q workers=%d, want natsjs and 8: %s", name, m.Relay, m.Workers, lines[i])
		}
		wantN := 200
		if name == scenarioRelayLatency {
			wantN = 50 // N/4
		}
		if m.N != wantN {
			t.Errorf("%s: n=%d, want %d", name, m.N, wantN)
		}
		if fields["hot_dropped"] != 0.0 {
			t.Errorf("%s: hot_dropped=%v, want 0 (the hot queue holds every event)", name, fields["hot_dropped"])
		}
		for _, note := range []string{"stream=OUTBOX_BENCH_", "storage=file", "duplicates=2m0s", "hot_capacity=", "dispatcher_workers=8"} {
			if !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.HasPrefix(n, note) }) {
				t.Errorf("%s: notes %q lack %q", name, m.Notes, note)
			}
		}
		for _, n := range m.Notes {
			if s, ok := strings.CutPrefix(n, "stream="); ok {
				streams = append(streams, s)
			}
		}
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("summary does not parse: %v", err)
	}
	for _, f := range []string{"relay_ratio", "relay_p99_us"} {
		if _, ok := s[f].(float64); !ok {
			t.Errorf("summary: field %q missing: %s", f, lines[len(lines)-1])
		}
	}
	if s["relay"] != "natsjs" {
		t.Errorf("summary: relay=%v, want natsjs", s["relay"])
	}
	// The median relay round's stream and relay_latency's: distinct, deleted.
	if len(streams) != 2 || streams[0] == streams[1] {
		t.Errorf("want the stream names of the relay line and the relay_latency line, distinct: %q", streams)
	}
	for _, name := range streams {
		if _, err := js.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s still there after the run: %v", name, err)
		}
	}
	t.Logf("%s\n%s", lines[1], lines[2])
}

// TestRelayUnreachable: a broker that cannot be reached fails the relay
// scenario with its address in the message (exit status 1), without the
// credentials the address holds.
func TestRelayUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-n", "50", "-rounds", "1", "-warmup", "5",
		"-relay", "natsjs", "-relay-url", "nats://u:secret@127.0.0.1:1", "-scenarios", "end_to_end,relay"}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, errOut.String())
	}
	msg := errOut.String()
	if !strings.Contains(msg, "relay on sqlite: relay natsjs at nats://127.0.0.1:1: connect:") {
		t.Errorf("stderr does not name the broker: %s", msg)
	}
	if strings.Contains(msg, "secret") {
		t.Errorf("stderr shows the password: %s", msg)
	}
}

// TestRelayURLForLog: the broker addresses in messages keep the servers
// and leave out users, passwords and tokens.
func TestRelayURLForLog(t *testing.T) {
	for _, tc := range []struct{ kind, url, want string }{
		{"natsjs", "nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"natsjs", "nats://u:secret@a:4222, secret@b:4223", "nats://a:4222,nats://b:4223"},
		{"natsjs", "u:secret@a:4222", "nats://a:4222"},
		{"rabbitmq", "amqp://guest:secret@127.0.0.1:5672/", "amqp://127.0.0.1:5672/"},
		{"rabbitmq", "amqps://u:secret@h/vh", "amqps://h:5671/vh"},
	} {
		if got := relayKinds[tc.kind].forLog(tc.url); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.kind, tc.url, got, tc.want)
		}
	}
}

// TestRelayFlags: the relay scenarios run by default only with -relay,
// which fills the broker's default address and the workers.
func TestRelayFlags(t *testing.T) {
	o, err := parseFlags([]string{"-db", "sqlite"}, &bytes.Buffer{})
	if err != nil || o.has(scenarioRelay) || o.has(scenarioRelayLatency) {
		t.Errorf("without -relay: scenarios %v, %v", o.scenarios, err)
	}
	o, err = parseFlags([]string{"-db", "sqlite", "-relay", "natsjs", "-workers", "6"}, &bytes.Buffer{})
	if err != nil || !o.has(scenarioRelay) || !o.has(scenarioRelayLatency) || !o.has(scenarioFloor) {
		t.Errorf("-relay natsjs: scenarios %v, %v", o.scenarios, err)
	}
	if o.relayURL != nats.DefaultURL || o.relayWorkers != defaultRelayWorkers {
		t.Errorf("-relay natsjs: url %q workers %d, want %q and %d", o.relayURL, o.relayWorkers, nats.DefaultURL, defaultRelayWorkers)
	}
	o, err = parseFlags([]string{"-db", "sqlite", "-relay", "natsjs", "-relay-workers", "6"}, &bytes.Buffer{})
	if err != nil || o.relayWorkers != 6 {
		t.Errorf("-relay-workers 6: workers %d, %v", o.relayWorkers, err)
	}
}

// TestSummaryRelayTargets checks the relay targets: relay_ratio at least
// 0.7 (against end_to_end) and relay_p99_us at most 5000.
func TestSummaryRelayTargets(t *testing.T) {
	b := &bench{opts: &options{db: "sqlite", relay: "natsjs"}, e2eRate: 1000, relayRate: 700, relayP99: ptr(5000.0)}
	s := b.summary()
	if !s.TargetsMet || *s.RelayRatio != 0.7 || *s.RelayP99us != 5000 || s.Relay != "natsjs" {
		t.Errorf("met: targets_met=%v missed=%v ratio=%v p99=%v relay=%q", s.TargetsMet, s.TargetsMissed, *s.RelayRatio, *s.RelayP99us, s.Relay)
	}
	b.relayFloorRate = 1400
	s = b.summary()
	if *s.RelayFloorPerS != 1400 || *s.RelayFloorRatio != 0.5 || !s.TargetsMet {
		t.Errorf("floor: per_s=%v ratio=%v met=%v", *s.RelayFloorPerS, *s.RelayFloorRatio, s.TargetsMet)
	}
	var floorOut bytes.Buffer
	(&printer{w: &floorOut}).summary(s)
	if f := "relay_floor_ratio 0.500 (natsjs relay/broker floor of 1400 msg/s)"; !strings.Contains(floorOut.String(), f) {
		t.Errorf("summary line lacks %q: %s", f, floorOut.String())
	}
	b.relayFloorRate = 0
	b.relayRate, b.relayP99 = 690, ptr(5000.1)
	s = b.summary()
	want := []string{"relay_ratio >= 0.70", "relay_p99_us <= 5000"}
	if s.TargetsMet || strings.Join(s.TargetsMissed, "|") != strings.Join(want, "|") {
		t.Errorf("missed: targets_met=%v missed=%q, want %q", s.TargetsMet, s.TargetsMissed, want)
	}
	var out bytes.Buffer
	(&printer{w: &out}).summary(s)
	for _, f := range []string{"relay_ratio 0.690 (natsjs/e2e, target >= 0.70)", "relay latency p99 5000.1 us (commit -> natsjs ack, target <= 5000)", "MISSED"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("summary line lacks %q: %s", f, out.String())
		}
	}
}

// amqpURL is the RabbitMQ of the relay tests: OUTBOX_TEST_AMQP_URL, by
// default the local one.
func amqpURL() string {
	if u := os.Getenv("OUTBOX_TEST_AMQP_URL"); u != "" {
		return u
	}
	return relayKinds["rabbitmq"].defaultURL
}

// TestRunSQLiteRabbitMQTiny runs relay and relay_latency through the
// rabbitmq relay to the real local RabbitMQ with tiny sizes: the lines name
// the broker and the exchange and queue, which are gone afterwards.
func TestRunSQLiteRabbitMQTiny(t *testing.T) {
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("RabbitMQ at %s: %v", amqpURL(), err)
		}
		t.Skipf("no RabbitMQ at %s (set OUTBOX_TEST_AMQP_URL): %v", amqpURL(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-n", "200", "-rounds", "1", "-warmup", "20",
		"-relay", "rabbitmq", "-relay-url", amqpURL(), "-relay-workers", "16",
		"-scenarios", "end_to_end,relay,relay_latency"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4:\n%s", len(lines), out.String())
	}
	for _, line := range lines[1:3] {
		var m struct {
			Relay string   `json:"relay"`
			Notes []string `json:"notes"`
			P99   *float64 `json:"p99_us"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if m.Relay != "rabbitmq" || !slices.Contains(m.Notes, "drained_by=auto-ack consumer") {
			t.Errorf("relay=%q notes=%q: %s", m.Relay, m.Notes, line)
		}
		for _, n := range m.Notes {
			if q, ok := strings.CutPrefix(n, "queue="); ok {
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err == nil {
					t.Errorf("queue %s still there after the run", q)
				}
				_ = ch.Close() // closed by the broker after the 404 anyway
			}
		}
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &s); err != nil || s["relay"] != "rabbitmq" || s["relay_ratio"] == nil || s["relay_p99_us"] == nil {
		t.Errorf("summary: %v %s", err, lines[3])
	}
	// The relay line carries the broker floor measured on its queue, and
	// the summary the relay rate over it.
	for _, f := range []string{"relay_floor_per_s", "relay_floor_ratio"} {
		if v, ok := s[f].(float64); !ok || v <= 0 {
			t.Errorf("summary %s = %v: %s", f, s[f], lines[3])
		}
	}
	for _, prefix := range []string{"broker_floor/s=", "relay/broker_floor=", "broker_floor_1x256/s=", "broker_floor_4x4/s=", "relay_direct/s="} {
		if !strings.Contains(lines[1], `"`+prefix) {
			t.Errorf("relay line lacks a note %s...: %s", prefix, lines[1])
		}
	}
	t.Logf("%s\n%s", lines[1], lines[2])
}

// TestCheckStoredWaits: a count that reaches the acknowledged events a
// little later (a consumer's messages still in flight) passes; one that
// does not fails once the ctx ends, naming both numbers.
func TestCheckStoredWaits(t *testing.T) {
	calls := 0
	rising := &relayTarget{stored: func(context.Context) (int64, error) { calls++; return int64(97 + calls), nil }}
	if err := checkStored(context.Background(), rising, 100); err != nil || calls != 3 {
		t.Errorf("rising count: err=%v after %d calls, want nil after 3", err, calls)
	}
	stuck := &relayTarget{stored: func(context.Context) (int64, error) { return 99, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := checkStored(ctx, stuck, 100); !errors.Is(err, context.Canceled) {
		t.Errorf("stuck count, ctx ended: err=%v, want context.Canceled", err)
	}
}
