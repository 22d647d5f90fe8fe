package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
)

// TestRunSQLiteTiny runs every scenario in process on SQLite with tiny
// sizes and checks that each JSON line parses and has its fields.
func TestRunSQLiteTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-n", "200", "-rounds", "1", "-warmup", "20",
		"-overload-n", "2000", "-overload-slow", "200us", "-recovery-n", "500", "-poll-interval", "200ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// Every scenario but wakeup (SQLite does not announce commits), the
	// ordered ones (only with -ordered-keys), the relay ones (only with
	// -relay), observed_end_to_end (only with -observe), the multinode
	// ones (only with -nodes), history and dashboard (only when named).
	scenarios := slices.DeleteFunc(slices.Clone(allScenarios), func(s string) bool {
		return s == scenarioWakeup || slices.Contains(orderedScenarios, s) || slices.Contains(relayScenarios, s) ||
			s == scenarioObservedE2E || slices.Contains(multinodeScenarios, s) || s == scenarioHistory || s == scenarioDashboard
	})
	if len(lines) != len(scenarios)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(scenarios)+1, out.String())
	}
	// Fields each scenario line must carry, beyond db, scenario and n.
	want := map[string][]string{
		scenarioFloor:    {"events_per_s", "peak_rss_mb"},
		scenarioPublish:  {"events_per_s", "ratio_to_floor", "peak_rss_mb"},
		scenarioEndToEnd: {"events_per_s", "ratio_to_floor", "peak_rss_mb"},
		scenarioLatency:  {"events_per_s", "p50_us", "p90_us", "p99_us", "max_us"},
		scenarioOverload: {"events_per_s", "peak_rss_mb", "time_to_done_s", "lost"},
		scenarioRecovery: {"events_per_s", "peak_rss_mb", "time_to_done_s", "p99_us", "duplicates", "cold_enqueued"},
	}
	for i, name := range scenarios {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatalf("line %d does not parse: %v\n%s", i+1, err, lines[i])
		}
		if m["db"] != "sqlite" || m["scenario"] != name {
			t.Errorf("line %d: db=%v scenario=%v, want sqlite %s", i+1, m["db"], m["scenario"], name)
		}
		if n, ok := m["n"].(float64); !ok || n < 1 {
			t.Errorf("%s: n = %v", name, m["n"])
		}
		for _, f := range want[name] {
			if _, ok := m[f].(float64); !ok {
				t.Errorf("%s: field %q missing or not a number: %s", name, f, lines[i])
			}
		}
		if name == scenarioOverload && m["lost"] != 0.0 {
			t.Errorf("overload lost %v events", m["lost"])
		}
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("summary does not parse: %v", err)
	}
	for _, f := range []string{"end_to_end_ratio", "publish_ratio", "p99_us", "peak_rss_mb", "drain_ratio", "drain_hot_p99_us", "drain_peak_rss_mb"} {
		if _, ok := s[f].(float64); !ok {
			t.Errorf("summary: field %q missing: %s", f, lines[len(lines)-1])
		}
	}
	if s["summary"] != true || s["db"] != "sqlite" {
		t.Errorf("summary line: %s", lines[len(lines)-1])
	}
}

// TestFlagErrors checks that bad flags fail with a clear message and exit
// status 2, and that -h prints the usage with the ratio definitions.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-db", "oracle"}, "outbox-bench: -db must be sqlite, mysql or postgres"},
		{[]string{"-db", "sqlite", "-dsn", "x"}, "-dsn is only for -db mysql or postgres"},
		{[]string{"-n", "-3"}, "-n must be at least 1"},
		{[]string{"-n", "0"}, "-n must be at least 1"}, // 0 stands for the default only when -n is not given
		{[]string{"-db", "mysql", "-dsn", "postgres://u@h/db"}, "a PostgreSQL URL with -db mysql"},
		{[]string{"-workers", "0"}, "-workers must be between 1 and"},
		{[]string{"-scenarios", "floor,bogus"}, `unknown scenario "bogus"`},
		{[]string{"-scenarios", "latency"}, "latency paces itself"},
		{[]string{"-db", "mysql", "-dsn", "not a dsn"}, "-dsn:"},
		{[]string{"-db", "postgres", "-dsn", "postgres://h:notaport/db"}, "-dsn:"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-payload", "1TiB"}, "-payload: want a size"},
		{[]string{"-payload", "1"}, "-payload: want a size"},
		{[]string{"-max-held-bytes", "0"}, "-max-held-bytes: want a positive size or -1"},
		{[]string{"-ordered-keys=0"}, "-ordered-keys: want a number of keys of at least 1"},
		{[]string{"-ordered-keys=many"}, `-ordered-keys: want a number of keys of at least 1, got "many"`},
		{[]string{"-ordered-keys", "0"}, "-ordered-keys must be at least 1"},
		{[]string{"-ordered-keys", "-5"}, `-ordered-keys: want a number of keys of at least 1, got "-5"`}, // was: flag provided but not defined: -5
		{[]string{"-ordered-keys", "-scenarios", "floor,end_to_end"}, "-ordered-keys: -scenarios selects no ordered scenario"},
		{[]string{"-scenarios", "ordered_end_to_end"}, "ordered_end_to_end is measured against end_to_end"},
		{[]string{"-scenarios", "end_to_end,ordered_latency"}, "ordered_latency paces itself"},
		{[]string{"-ordered-keys", "extra"}, `-ordered-keys: want a number of keys of at least 1, got "extra"`}, // was: unexpected argument "extra"
		{[]string{"-n", "5", "extra"}, `unexpected argument "extra"`},
		{[]string{"-scenarios", "end_to_end,relay"}, "the relay scenarios need -relay (natsjs or rabbitmq)"},
		{[]string{"-relay", "kafka"}, `-relay must be natsjs or rabbitmq, got "kafka"`},
		{[]string{"-relay-url", "nats://x:4222"}, "-relay-url needs -relay"},
		{[]string{"-relay-workers", "8"}, "-relay-workers needs -relay"},
		{[]string{"-relay", "rabbitmq", "-relay-url", "http://u:secret@x/"}, "-relay-url: AMQP scheme must be"},
		{[]string{"-relay", "rabbitmq", "-relay-url", "amqp://u:secret@x:bad/"}, `-relay-url: invalid port ":bad"`},
		{[]string{"-relay", "natsjs", "-relay-url", "nats://u:secret@x:bad"}, `-relay-url: invalid port ":bad"`},
		{[]string{"-relay", "natsjs", "-relay-url", "nats://x:4222,nats://"}, "-relay-url: a server address without a host"},
		{[]string{"-relay", "natsjs", "-relay-url", "nats://127.0.0.1:99999"}, "-relay-url: port 99999 is not 1..65535"},
		{[]string{"-relay", "natsjs", "-relay-url", "http://x"}, `-relay-url: scheme "http": want nats://`},
		{[]string{"-relay", "rabbitmq", "-relay-url", "amqp://guest:guest@127.0.0.1:99999/"}, "-relay-url: port 99999 is not 1..65535"},
		{[]string{"-relay", "natsjs", "-relay-workers", "300"}, "-relay-workers must be between 1 and 256"},
		{[]string{"-relay", "natsjs", "-scenarios", "floor,end_to_end"}, "-relay: -scenarios selects no relay scenario"},
		{[]string{"-relay", "natsjs", "-scenarios", "relay"}, "relay is measured against end_to_end"},
		{[]string{"-relay", "natsjs", "-scenarios", "end_to_end,relay_latency"}, "relay_latency paces itself at half the relay rate"},
		{[]string{"-db", "sqlite", "-scenarios", "floor", "-cpuprofile", "/nonexistent/dir/cpu.prof"}, "-cpuprofile:"},
		{[]string{"-db", "sqlite", "-scenarios", "floor", "-trace", "/nonexistent/dir/trace.out"}, "-trace:"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: stderr %q does not contain %q", tc.args, errOut.String(), tc.msg)
		}
		if strings.Contains(errOut.String(), "secret") {
			t.Errorf("%v: stderr %q shows the password", tc.args, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != 0 {
		t.Errorf("-h: exit status %d, want 0", code)
	}
	for _, s := range []string{"publish_ratio", "floor rate / publish rate", "end_to_end_ratio", "-workers",
		"ordered_ratio", "ordered_end_to_end rate / end_to_end rate", "ordered_p99_us", "ordered_one_key", "-ordered-keys",
		"relay_ratio", "relay rate / end_to_end rate", "relay_p99_us", "one of: natsjs, rabbitmq;", "-relay-url", "-relay-workers", "HotCapacity"} {
		if !strings.Contains(errOut.String(), s) {
			t.Errorf("-h output lacks %q", s)
		}
	}
}

// TestSummaryTargets checks that the summary reports every missed target,
// the latency p99 included, and none when all are met.
func TestSummaryTargets(t *testing.T) {
	met := &bench{opts: &options{db: "sqlite"}, floorRate: 1000, publishRate: 980, e2eRate: 960,
		p99: ptr(90.0), overloadRSS: ptr(40.0), lost: ptr(0)}
	if s := met.summary(); !s.TargetsMet || len(s.TargetsMissed) != 0 {
		t.Errorf("all met: targets_met=%v missed=%v", s.TargetsMet, s.TargetsMissed)
	}
	missed := &bench{opts: &options{db: "sqlite"}, floorRate: 1000, publishRate: 800, e2eRate: 700,
		p99: ptr(2651.0), overloadRSS: ptr(70.0), lost: ptr(2)}
	s := missed.summary()
	want := []string{"publish_ratio <= 1.05", "end_to_end_ratio >= 0.95", "p99_us <= 100", "peak_rss_mb <= 64", "lost = 0"}
	if s.TargetsMet || strings.Join(s.TargetsMissed, "|") != strings.Join(want, "|") {
		t.Errorf("all missed: targets_met=%v missed=%q, want %q", s.TargetsMet, s.TargetsMissed, want)
	}
}

// TestPercentile checks the nearest-rank percentile.
func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{50: 50, 90: 90, 99: 99, 100: 100, 1: 1} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

// TestSeenSet checks the overload bitmap: duplicates and missing indexes.
func TestSeenSet(t *testing.T) {
	s := newSeenSet(130)
	for _, i := range []int{0, 63, 64, 129, 64} {
		s.mark(i)
	}
	if got := s.missing(130); got != 126 {
		t.Errorf("missing = %d, want 126", got)
	}
	if s.dups.Load() != 1 || s.count.Load() != 4 {
		t.Errorf("dups = %d, count = %d; want 1, 4", s.dups.Load(), s.count.Load())
	}
}

// TestParseSize checks the byte sizes of -payload and -max-held-bytes.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "1MiB": 1 << 20, "64 KiB": 64 << 10, "2GB": 2 << 30, "10B": 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5MiB", "MiB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
	if p := padPayload(5); string(p) != `"xxx"` {
		t.Errorf("padPayload(5) = %q", p)
	}
}

// TestSummaryRSSTargetWithPayload checks the peak-RSS target with
// -payload: the payload budget plus the fixed overhead, none without a
// budget.
func TestSummaryRSSTargetWithPayload(t *testing.T) {
	b := &bench{opts: &options{db: "sqlite", payload: 1 << 20}, overloadRSS: ptr(250.0), lost: ptr(0)}
	if s := b.summary(); !s.TargetsMet || *s.RSSTargetMiB != 160+targetRSSOverheadMiB {
		t.Errorf("250 MiB with the default budget: met=%v target=%v", s.TargetsMet, *s.RSSTargetMiB)
	}
	b.overloadRSS = ptr(400.0)
	if s := b.summary(); s.TargetsMet {
		t.Errorf("400 MiB with the default budget: target met")
	}
	b.opts.maxHeld = -1
	if s := b.summary(); !s.TargetsMet || *s.RSSTargetMiB != 0 {
		t.Errorf("no budget: met=%v target=%v, want no target", s.TargetsMet, *s.RSSTargetMiB)
	}
}

// TestWakeupNeedsANotifyingDatabase: asked for on SQLite, the wakeup
// scenario is a flag error; by default it is left out there.
func TestWakeupNeedsANotifyingDatabase(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-db", "sqlite", "-scenarios", "wakeup"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "wakeup needs a database that announces commits") {
		t.Fatalf("exit %d, stderr %q; want 2 and the reason", code, errOut.String())
	}
	o, err := parseFlags([]string{"-db", "sqlite"}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if o.has(scenarioWakeup) {
		t.Fatalf("default scenarios on SQLite include wakeup: %v", o.scenarios)
	}
	o, err = parseFlags([]string{"-db", "postgres"}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if !o.has(scenarioWakeup) {
		t.Fatalf("default scenarios on PostgreSQL lack wakeup: %v", o.scenarios)
	}
}

// TestRunPostgresWakeup runs the wakeup scenario on the PostgreSQL of
// OUTBOX_TEST_POSTGRES_DSN: events committed on plain transactions reach
// the listener while the poller rests for an hour, through LISTEN/NOTIFY.
func TestRunPostgresWakeup(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "postgres", "-dsn", dsn, "-json", "-scenarios", "wakeup", "-n", "200", "-warmup", "20"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var m, s map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &m) != nil || json.Unmarshal([]byte(lines[1]), &s) != nil {
		t.Fatalf("want a wakeup line and a summary:\n%s", out.String())
	}
	if m["scenario"] != scenarioWakeup || m["n"] != 20.0 {
		t.Errorf("line: %s", lines[0])
	}
	if _, ok := s["wakeup_p99_us"].(float64); !ok {
		t.Errorf("summary lacks wakeup_p99_us: %s", lines[1])
	}
	t.Logf("%s", lines[0])
}

// TestOrderedKeysFlag checks the forms of -ordered-keys: without a value
// (1000 keys), with "=K" or " K", and that the ordered scenarios run by
// default only with it, or when -scenarios names them.
func TestOrderedKeysFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		keys, n int
		ordered bool
	}{
		{[]string{}, 0, defaultSQLiteN, false},
		{[]string{"-ordered-keys"}, defaultOrderedKeys, defaultSQLiteN, true},
		{[]string{"-ordered-keys", "-n", "10"}, defaultOrderedKeys, 10, true},
		{[]string{"-ordered-keys=7"}, 7, defaultSQLiteN, true},
		{[]string{"-ordered-keys", "5", "-n", "10"}, 5, 10, true},
		{[]string{"-n", "10", "-ordered-keys", "1"}, 1, 10, true},
		{[]string{"-scenarios", "end_to_end,ordered_end_to_end"}, defaultOrderedKeys, defaultSQLiteN, true},
	} {
		var errOut bytes.Buffer
		o, err := parseFlags(tc.args, &errOut)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if o.orderedKeys != tc.keys || o.n != tc.n || o.has(scenarioOrderedE2E) != tc.ordered {
			t.Errorf("%v: keys=%d n=%d ordered=%v, want %d %d %v (scenarios %v)",
				tc.args, o.orderedKeys, o.n, o.has(scenarioOrderedE2E), tc.keys, tc.n, tc.ordered, o.scenarios)
		}
	}
	o, err := parseFlags([]string{"-ordered-keys", "-scenarios", "end_to_end,ordered_end_to_end"}, &bytes.Buffer{})
	if err != nil || o.has(scenarioOrderedOneKey) || o.has(scenarioOrderedLatency) || o.has(scenarioFloor) {
		t.Errorf("-scenarios with -ordered-keys: %v %v, want exactly the named scenarios", o.scenarios, err)
	}
}

// TestRunSQLiteOrderedTiny runs the ordered scenarios in process on SQLite
// with tiny sizes and checks their lines and the summary's ordered fields.
func TestRunSQLiteOrderedTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-ordered-keys", "3", "-n", "200", "-rounds", "2", "-warmup", "20",
		"-scenarios", "end_to_end,ordered_end_to_end,ordered_one_key,ordered_latency", "-poll-interval", "200ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	scenarios := []string{scenarioEndToEnd, scenarioOrderedE2E, scenarioOrderedOneKey, scenarioOrderedLatency}
	if len(lines) != len(scenarios)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(scenarios)+1, out.String())
	}
	want := map[string][]string{
		scenarioOrderedE2E:     {"events_per_s", "order_keys", "cold_enqueued"},
		scenarioOrderedOneKey:  {"events_per_s", "order_keys", "cold_enqueued"},
		scenarioOrderedLatency: {"events_per_s", "p50_us", "p99_us", "max_us"},
	}
	for i, name := range scenarios {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatalf("line %d does not parse: %v\n%s", i+1, err, lines[i])
		}
		if m["scenario"] != name {
			t.Errorf("line %d: scenario=%v, want %s", i+1, m["scenario"], name)
		}
		for _, f := range want[name] {
			if _, ok := m[f].(float64); !ok {
				t.Errorf("%s: field %q missing or not a number: %s", name, f, lines[i])
			}
		}
		switch name {
		case scenarioOrderedE2E:
			if m["n"] != 200.0 || m["order_keys"] != 3.0 {
				t.Errorf("%s: n=%v keys=%v, want 200 events on 3 keys", name, m["n"], m["order_keys"])
			}
		case scenarioOrderedOneKey:
			if m["n"] != 20.0 || m["order_keys"] != 1.0 {
				t.Errorf("%s: n=%v keys=%v, want 20 events (N/10) on 1 key", name, m["n"], m["order_keys"])
			}
		}
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("summary does not parse: %v", err)
	}
	for _, f := range []string{"ordered_ratio", "ordered_p99_us", "ordered_one_key_per_s"} {
		if _, ok := s[f].(float64); !ok {
			t.Errorf("summary: field %q missing: %s", f, lines[len(lines)-1])
		}
	}
	if s["ordered_keys"] != 3.0 {
		t.Errorf("summary: ordered_keys = %v, want 3", s["ordered_keys"])
	}
}

// TestSummaryOrderedTargets checks the ordered targets: ordered_ratio at
// least 0.7 (against end_to_end) and ordered_p99_us at most 1000.
func TestSummaryOrderedTargets(t *testing.T) {
	b := &bench{opts: &options{db: "sqlite", orderedKeys: 1000}, e2eRate: 1000, orderedRate: 700,
		oneKeyRate: 38.04, orderedP99: ptr(1000.0)}
	s := b.summary()
	if !s.TargetsMet || *s.OrderedRatio != 0.7 || *s.OrderedKeys != 1000 || *s.OneKeyPerS != 38.0 {
		t.Errorf("met: targets_met=%v missed=%v ratio=%v keys=%v one key=%v",
			s.TargetsMet, s.TargetsMissed, *s.OrderedRatio, *s.OrderedKeys, *s.OneKeyPerS)
	}
	b.orderedRate, b.orderedP99 = 690, ptr(1000.1)
	s = b.summary()
	want := []string{"ordered_ratio >= 0.70", "ordered_p99_us <= 1000"}
	if s.TargetsMet || strings.Join(s.TargetsMissed, "|") != strings.Join(want, "|") {
		t.Errorf("missed: targets_met=%v missed=%q, want %q", s.TargetsMet, s.TargetsMissed, want)
	}
	var out bytes.Buffer
	(&printer{w: &out}).summary(s)
	for _, f := range []string{"ordered_ratio 0.690", "1000 keys", "one key 38.0 events/s", "ordered latency p99 1000.1 us"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("summary line lacks %q: %s", f, out.String())
		}
	}
}
