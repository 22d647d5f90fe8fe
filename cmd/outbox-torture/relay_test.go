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
// else, with its address in the message, and leaves no database behind.
func TestTortureRelayUnreachable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-db", "sqlite", "-relay", "natsjs", "-relay-url", "nats://127.0.0.1:1", "-cycles", "1"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "-relay: connect to NATS at nats://127.0.0.1:1:") || strings.Contains(msg, "database kept") {
		t.Errorf("stderr: %s", msg)
	}
}
