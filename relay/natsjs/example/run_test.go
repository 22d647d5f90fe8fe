package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := os.Getenv("OUTBOX_TEST_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s: %v", url, err)
		}
		t.Skipf("no NATS at %s (set OUTBOX_TEST_NATS_URL): %v", url, err)
	}
	nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := Run(ctx, Options{URL: url, Events: 4}, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"committed 4 OrderPlaced events",
		"the stream still holds 4 messages",
		"processed=false (the inbox skipped it)",
		"done: 4 invoices, 4 of 4 outbox rows DONE",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "processed=true"); n != 4 {
		t.Errorf("%d messages processed, want 4:\n%s", n, s)
	}
}
