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

// summaryFields matches the fields of a summary line.
var summaryFields = regexp.MustCompile(`(\w+)=(\S+)`)

// runTorture runs the parent with args (the database's flags included) and
// returns the fields of its summary line. It fails t unless the run
// exited 0 with events > 0, lost=0, phantom=0 and, when the run tracked
// order under -ordered, order_violations=0 and seq_mismatch=0.
func runTorture(t *testing.T, db string, args ...string) map[string]string {
	t.Helper()
	var stderr bytes.Buffer
	return runTortureTo(t, &stderr, db, args...)
}

// runTortureTo is runTorture writing the parent's stderr to stderr.
func runTortureTo(t *testing.T, stderr *bytes.Buffer, db string, args ...string) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("torture: re-executes child processes and waits for leases to expire; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	start := time.Now()
	code := run(ctx, append([]string{"-db", db, "-drain-timeout", "60s"}, args...), &stdout, stderr)
	out := strings.TrimSpace(stdout.String())
	t.Logf("%s (%v)", out, time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit status %d\nstdout: %s\nstderr:\n%s", code, out, stderr.String())
	}
	if !strings.HasPrefix(out, "torture: db="+db+" ") {
		t.Fatalf("summary line %q does not start with torture: db=%s\nstderr:\n%s", out, db, stderr.String())
	}
	fields := map[string]string{}
	for _, m := range summaryFields.FindAllStringSubmatch(out, -1) {
		fields[m[1]] = m[2]
	}
	want := []string{"lost", "phantom"}
	if fields["ordered"] == "true" {
		want = append(want, "order_violations", "seq_mismatch")
	}
	if fields["relay"] != "" {
		want = append(want, "stream_lost", "stream_phantom")
		if fields["ordered"] == "true" {
			want = append(want, "stream_order_violations")
		}
		// RabbitMQ keeps the at-least-once redeliveries; JetStream drops
		// them by Nats-Msg-Id.
		if fields["relay"] == relayNATS {
			want = append(want, "stream_duplicates")
		}
		if fields["relay"] == relayNATS && fields["stream_messages"] != fields["events"] {
			t.Errorf("stream_messages=%s, want one per committed event (events=%s): %s", fields["stream_messages"], fields["events"], out)
		}
	}
	for _, f := range want {
		if fields[f] != "0" {
			t.Errorf("%s=%q, want 0: %s\nstderr:\n%s", f, fields[f], out, stderr.String())
		}
	}
	if fields["events"] == "0" || fields["events"] == "" {
		t.Errorf("no event was committed: %s", out)
	}
	if strings.Contains(stderr.String(), "database kept") {
		t.Errorf("the database was kept after a successful run:\n%s", stderr.String())
	}
	return fields
}

// Two SIGKILLed children and a draining one on SQLite, through the real
// parent logic: the summary must say lost=0 phantom=0 and the exit status
// 0. The events are spread unordered over 20 keys: the order violations
// that unordered delivery causes are logged (they vary from run to run).
func TestTortureSQLite(t *testing.T) {
	f := runTorture(t, "sqlite", "-cycles", "2", "-keys", "20")
	t.Logf("unordered delivery over 20 keys: order_violations=%s", f["order_violations"])
}

// Ordered delivery on SQLite with three children at once: no order
// violation, every outbox position the commit position.
func TestTortureOrderedSQLite(t *testing.T) {
	runTorture(t, "sqlite", "-ordered", "-keys", "20", "-procs", "3", "-cycles", "4")
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
		{"-ordered", "-keys", "0"},
		{"-keys", "-1"},
		{"-procs", "0"},
		{"-procs", "17"},
		{"extra"},
		{"-nosuchflag"},
		{"-relay", "kafka"},
		{"-relay-url", "nats://127.0.0.1:4222"},
		{"-relay", "natsjs", "-relay-url", " "},
		{"-relay", "natsjs", "-relay-url", "not a url"},
		{"-relay", "rabbitmq", "-relay-url", "http://127.0.0.1:5672/"},
		{"-relay", "rabbitmq", "-relay-url", "amqp://u:secret@127.0.0.1:bad/"},
		{"-relay", "natsjs", "-relay-url", "nats://u:secret@127.0.0.1:bad"},
		// 20 children of at least 50ms each, one at a time, need 1s: it
		// ran 9 cycles and exited 0.
		{"-cycles", "20", "-duration", "500ms"},
		{"-cycles", "1", "-duration", "1ns"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit status %d, want 2", args, code)
		}
		if strings.Contains(stderr.String(), "secret") {
			t.Errorf("%q: stderr %q shows the password", args, stderr.String())
		}
		if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n") + 1; lines != 1 || stdout.Len() != 0 {
			t.Errorf("%q: want one line on stderr and nothing on stdout, got stderr %q stdout %q", args, stderr.String(), stdout.String())
		}
	}
}

// The final child's start waits long enough for its transactions at a
// low -rate: at 2 tx/s its 200 took 100 s, and the fixed minute failed
// every such run as a child that misbehaved.
func TestReadyTimeScalesWithRate(t *testing.T) {
	for _, tc := range []struct {
		rate int
		want time.Duration
	}{{0, readyTimeout}, {1000, readyTimeout}, {2, 200 * time.Second}, {1, 400 * time.Second}} {
		if got := readyTime(tc.rate); got != tc.want {
			t.Errorf("readyTime(%d) = %v, want %v", tc.rate, got, tc.want)
		}
	}
	if _, err := parseFlags([]string{"-cycles", "20", "-duration", "500ms", "-procs", "2"}, nil); err != nil {
		t.Errorf("20 cycles in 500ms with 2 at once (exactly enough): %v", err)
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

// Every cycle asked for runs, however much of -duration starting the
// children took: a run that silently killed fewer children than -cycles
// said would check fewer crashes than it reports.
func TestLifeRunsEveryCycle(t *testing.T) {
	opts, err := parseFlags([]string{"-cycles", "4", "-duration", "200ms", "-seed", "7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &torture{opts: opts, rng: newRand(opts.seed)}
	for _, spent := range []time.Duration{150 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		for i := range opts.cycles {
			if life := tr.life(i, spent); life < minRun {
				t.Errorf("cycle %d of 4 after %v of 200ms: life %v, want at least %v", i, spent, life, minRun)
			}
		}
	}
}
