package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMain runs this test binary as a torture child when the parent logic
// under test re-executes it (os.Executable is the test binary), and as the
// test suite otherwise.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(envChild); ok {
		os.Exit(childMain(spec, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

var summaryLine = regexp.MustCompile(`^torture: db=sqlite cycles=2 events=(\d+) lost=(\d+) phantom=(\d+) duplicates=(\d+) `)

// Two SIGKILLed children and a draining one on SQLite, through the real
// parent logic: the summary must say lost=0 phantom=0 and the exit status 0.
func TestTortureSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("torture: re-executes child processes and waits for leases to expire; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"-db", "sqlite", "-cycles", "2", "-drain-timeout", "60s"}, &stdout, &stderr)
	out := strings.TrimSpace(stdout.String())
	t.Logf("%s (%v)", out, time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit status %d\nstdout: %s\nstderr:\n%s", code, out, stderr.String())
	}
	m := summaryLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("summary line %q does not match %v\nstderr:\n%s", out, summaryLine, stderr.String())
	}
	if m[1] == "0" {
		t.Errorf("no event was committed: %s", out)
	}
	if m[2] != "0" || m[3] != "0" {
		t.Errorf("lost=%s phantom=%s, want 0 and 0: %s\nstderr:\n%s", m[2], m[3], out, stderr.String())
	}
	if strings.Contains(stderr.String(), "database kept") {
		t.Errorf("the database was kept after a successful run:\n%s", stderr.String())
	}
}

// Bad flags exit with status 2 and one line on stderr.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-db", "oracle"},
		{"-db", "postgres", "-dsn", "postgres://h:notaport/db"},
		{"-db", "sqlite", "-dsn", "x"},
		{"-cycles", "-3"},
		{"-rollback", "2"},
		{"-min-run", "2s", "-max-run", "1s"},
		{"extra"},
		{"-nosuchflag"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit status %d, want 2", args, code)
		}
		if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n") + 1; lines != 1 || stdout.Len() != 0 {
			t.Errorf("%q: want one line on stderr and nothing on stdout, got stderr %q stdout %q", args, stderr.String(), stdout.String())
		}
	}
}

// Cycles spread over -duration fit into it.
func TestLifeFitsDuration(t *testing.T) {
	opts, err := parseFlags([]string{"-cycles", "10", "-duration", "5s", "-seed", "7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &torture{opts: opts, rng: newRand(opts.seed)}
	var spent time.Duration
	for i := range opts.cycles {
		life := tr.life(i, spent)
		if life <= 0 {
			t.Fatalf("cycle %d: no time left after %v", i, spent)
		}
		spent += life
	}
	if spent > opts.duration {
		t.Errorf("10 cycles took %v of a 5s budget", spent)
	}
}
