package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
)

var summaryLinePG = regexp.MustCompile(`^torture: db=postgres cycles=2 events=(\d+) lost=(\d+) phantom=(\d+) duplicates=(\d+) `)

// Two SIGKILLed children and a draining one on PostgreSQL (a scratch
// database on the server of OUTBOX_TEST_POSTGRES_DSN): lost=0 phantom=0
// and exit status 0.
func TestTorturePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("torture: re-executes child processes; skipped with -short")
	}
	dsn := testdb.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"-db", "postgres", "-dsn", dsn, "-cycles", "2", "-drain-timeout", "60s"}, &stdout, &stderr)
	out := strings.TrimSpace(stdout.String())
	t.Logf("%s (%v)", out, time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit status %d\nstdout: %s\nstderr:\n%s", code, out, stderr.String())
	}
	m := summaryLinePG.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("summary line %q does not match %v\nstderr:\n%s", out, summaryLinePG, stderr.String())
	}
	if m[1] == "0" {
		t.Errorf("no event was committed: %s", out)
	}
	if m[2] != "0" || m[3] != "0" {
		t.Errorf("lost=%s phantom=%s, want 0 and 0: %s\nstderr:\n%s", m[2], m[3], out, stderr.String())
	}
}
