package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
)

// runRecoveryTiny runs end_to_end, recovery and ordered_recovery on db
// with tiny sizes and checks their lines and the summary's drain fields:
// every seeded row delivered (the scenario fails otherwise), in order per
// key for ordered_recovery.
func runRecoveryTiny(t *testing.T, db string, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	args := append([]string{"-db", db, "-json", "-n", "200", "-rounds", "1", "-warmup", "20", "-ordered-keys", "3",
		"-recovery-n", "2000", "-recovery-keys", "7", "-scenarios", "end_to_end,recovery,ordered_recovery"}, extra...)
	if code := run(ctx, args, &out, &errOut); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4:\n%s", len(lines), out.String())
	}
	for i, want := range []struct {
		scenario string
		n        float64
	}{{scenarioRecovery, 2000}, {scenarioOrderedRecovery, 200}} {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i+1]), &m); err != nil {
			t.Fatalf("line %d does not parse: %v", i+2, err)
		}
		if m["scenario"] != want.scenario || m["n"] != want.n {
			t.Errorf("line %d: scenario=%v n=%v, want %s with %v", i+2, m["scenario"], m["n"], want.scenario, want.n)
		}
		if m["cold_enqueued"].(float64) < want.n || m["duplicates"] != 0.0 {
			t.Errorf("%s: cold_enqueued=%v duplicates=%v, want at least %v and 0", want.scenario, m["cold_enqueued"], m["duplicates"], want.n)
		}
		if want.scenario == scenarioOrderedRecovery && m["order_keys"] != 7.0 {
			t.Errorf("%s: order_keys=%v, want 7", want.scenario, m["order_keys"])
		}
		t.Logf("%s", lines[i+1])
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &s); err != nil {
		t.Fatalf("summary does not parse: %v", err)
	}
	for _, f := range []string{"drain_ratio", "drain_hot_p99_us", "drain_peak_rss_mb", "ordered_drain_ratio"} {
		if _, ok := s[f].(float64); !ok {
			t.Errorf("summary: field %q missing: %s", f, lines[3])
		}
	}
}

// The recovery scenarios seed a crashed node's backlog with each
// database's bulk SQL and drain it.
func TestRunSQLiteRecoveryTiny(t *testing.T) { runRecoveryTiny(t, "sqlite") }

func TestRunMySQLRecoveryTiny(t *testing.T) {
	runRecoveryTiny(t, "mysql", "-dsn", testdb.MySQLDSN(t))
}

func TestRunPostgresRecoveryTiny(t *testing.T) {
	runRecoveryTiny(t, "postgres", "-dsn", testdb.PostgresDSN(t))
}

// TestSummaryDrainTargets checks the recovery targets: drain_ratio at
// least 0.8 against end_to_end, recovery's peak RSS at most overload's
// target; ordered_drain_ratio and the hot p99 are reported only.
func TestSummaryDrainTargets(t *testing.T) {
	b := &bench{opts: &options{db: "sqlite"}, e2eRate: 1000, drainRate: 800, orderedDrainRate: 120,
		drainHotP99: ptr(5000.0), drainRSS: ptr(64.0)}
	s := b.summary()
	if !s.TargetsMet || *s.DrainRatio != 0.8 || *s.OrderedDrainRatio != 0.12 || *s.DrainHotP99us != 5000 {
		t.Errorf("met: targets_met=%v missed=%v drain=%v ordered=%v", s.TargetsMet, s.TargetsMissed, *s.DrainRatio, *s.OrderedDrainRatio)
	}
	b.drainRate, b.drainRSS = 799, ptr(64.1)
	s = b.summary()
	want := []string{"drain_ratio >= 0.80", "drain_peak_rss_mb <= 64"}
	if s.TargetsMet || strings.Join(s.TargetsMissed, "|") != strings.Join(want, "|") {
		t.Errorf("missed: targets_met=%v missed=%q, want %q", s.TargetsMet, s.TargetsMissed, want)
	}
	var out bytes.Buffer
	(&printer{w: &out}).summary(s)
	for _, f := range []string{"drain_ratio 0.799", "hot p99 during the drain 5000.0 us", "ordered_drain_ratio 0.120"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("summary line lacks %q: %s", f, out.String())
		}
	}
}
