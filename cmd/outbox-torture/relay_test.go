package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
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

// connectNATSForTest connects to the test server and closes the connection in
// Cleanup. Without a server the test skips, or fails when CI=true.
func connectNATSForTest(t *testing.T) jetstream.JetStream {
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
	return js
}

// streamLine is the parent's -v line naming the run's stream.
var streamLine = regexp.MustCompile(`outbox-torture: stream: (\S+) on `)

// Ordered delivery relayed to JetStream on SQLite, two children at once,
// SIGKILLed: every committed event is stored in the stream exactly once
// (stream_lost=0, stream_duplicates=0, stream_phantom=0), in per-key order,
// and the run's stream is deleted at the end.
func TestTortureRelaySQLite(t *testing.T) {
	js := connectNATSForTest(t)
	var stderr bytes.Buffer
	f := runTortureTo(t, &stderr, "sqlite", "-relay", "natsjs", "-relay-url", natsURL(), "-ordered", "-keys", "20",
		"-procs", "2", "-cycles", "3", "-v")
	if f["relay"] != "natsjs" || f["stream_order_violations"] != "0" {
		t.Errorf("relay=%q stream_order_violations=%q, want natsjs and 0", f["relay"], f["stream_order_violations"])
	}
	m := streamLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("-v did not name the stream:\n%s", stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, m[1]); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream %s still there after the run: %v", m[1], err)
	}
}

// A NATS server that cannot be reached fails the run before anything
// else, with its address (without the credentials it holds) in the
// message, and leaves no database behind.
func TestTortureRelayUnreachable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-db", "sqlite", "-relay", "natsjs", "-relay-url", "nats://u:secret@127.0.0.1:1", "-cycles", "1"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "-relay: connect to NATS at nats://127.0.0.1:1:") || strings.Contains(msg, "secret") || strings.Contains(msg, "database kept") {
		t.Errorf("stderr: %s", msg)
	}
}

// amqpURL is the RabbitMQ of the relay tests: OUTBOX_TEST_AMQP_URL, by
// default the local one.
func amqpURL() string {
	if u := os.Getenv("OUTBOX_TEST_AMQP_URL"); u != "" {
		return u
	}
	return defaultAMQPURL
}

// queueLine is the parent's -v line naming the run's queue.
var queueLine = regexp.MustCompile(`outbox-torture: stream: (outbox-torture-\S+) on `)

// Ordered delivery relayed to RabbitMQ on SQLite, two children at once,
// SIGKILLed: every committed event is in the queue (stream_lost=0), no
// message of an uncommitted event (stream_phantom=0), in per-key order;
// duplicates are the at-least-once redeliveries RabbitMQ does not drop,
// reported and not failed on. The run's queue and exchange are deleted at
// the end.
func TestTortureRelayRabbitMQSQLite(t *testing.T) {
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("RabbitMQ at %s: %v", amqpURL(), err)
		}
		t.Skipf("no RabbitMQ at %s (set OUTBOX_TEST_AMQP_URL): %v", amqpURL(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	var stderr bytes.Buffer
	f := runTortureTo(t, &stderr, "sqlite", "-relay", "rabbitmq", "-relay-url", amqpURL(), "-ordered", "-keys", "20",
		"-procs", "2", "-cycles", "3", "-v")
	if f["relay"] != "rabbitmq" || f["stream_order_violations"] != "0" {
		t.Errorf("relay=%q stream_order_violations=%q, want rabbitmq and 0", f["relay"], f["stream_order_violations"])
	}
	if f["stream_duplicates"] == "" {
		t.Error("no stream_duplicates count in the summary")
	}
	m := queueLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("-v did not name the queue:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "guest:guest") {
		t.Errorf("the broker's credentials are in the log:\n%s", stderr.String())
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclarePassive(m[1], true, false, false, false, nil); err == nil {
		t.Errorf("queue %s still there after the run", m[1])
	}
}

// A RabbitMQ that cannot be reached fails the run before anything else,
// with its address (without credentials) in the message, and leaves no
// database behind.
func TestTortureRelayRabbitMQUnreachable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-db", "sqlite", "-relay", "rabbitmq", "-relay-url", "amqp://u:secret@127.0.0.1:1/", "-cycles", "1"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, "-relay: connect to RabbitMQ at amqp://127.0.0.1:1/:") || strings.Contains(msg, "secret") || strings.Contains(msg, "database kept") {
		t.Errorf("stderr: %s", msg)
	}
}

// -relay picks its broker's default address: $OUTBOX_TEST_AMQP_URL (else
// the local RabbitMQ) for rabbitmq, $OUTBOX_TEST_NATS_URL for natsjs; an
// empty -relay-url is refused for both.
func TestRelayURLDefaults(t *testing.T) {
	t.Setenv("OUTBOX_TEST_AMQP_URL", "")
	t.Setenv("OUTBOX_TEST_NATS_URL", "nats://example:4222")
	for relay, want := range map[string]string{"rabbitmq": defaultAMQPURL, "natsjs": "nats://example:4222"} {
		o, err := parseFlags([]string{"-relay", relay}, nil)
		if err != nil || o.relayURL != want {
			t.Errorf("-relay %s: url %q, err %v; want %q", relay, o.relayURL, err, want)
		}
		if _, err := parseFlags([]string{"-relay", relay, "-relay-url", " "}, nil); err == nil {
			t.Errorf("-relay %s -relay-url ' ': no error", relay)
		}
	}
	t.Setenv("OUTBOX_TEST_AMQP_URL", "amqp://example:5672/")
	if o, err := parseFlags([]string{"-relay", "rabbitmq"}, nil); err != nil || o.relayURL != "amqp://example:5672/" {
		t.Errorf("-relay rabbitmq with $OUTBOX_TEST_AMQP_URL: url %q, err %v", o.relayURL, err)
	}
}
