package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRunSQLiteObservedTiny runs end_to_end and observed_end_to_end in
// process on SQLite with tiny sizes, two rounds: the observed line carries
// its rate, both rounds and the spans the SDK exported (a send and a
// process span per event, warm-up included), and the summary both rates
// and observability_cost.
func TestRunSQLiteObservedTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-observe", "-n", "200", "-rounds", "2", "-warmup", "20",
		"-scenarios", "end_to_end,observed_end_to_end", "-poll-interval", "200ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), out.String())
	}
	var e2e, observed, s map[string]any
	for i, m := range []*map[string]any{&e2e, &observed, &s} {
		if err := json.Unmarshal([]byte(lines[i]), m); err != nil {
			t.Fatalf("line %d does not parse: %v\n%s", i+1, err, lines[i])
		}
	}
	if e2e["scenario"] != scenarioEndToEnd || observed["scenario"] != scenarioObservedE2E {
		t.Fatalf("scenarios %v, %v; want %s, %s", e2e["scenario"], observed["scenario"], scenarioEndToEnd, scenarioObservedE2E)
	}
	if observed["n"] != 200.0 || observed["db"] != "sqlite" {
		t.Errorf("observed line: n=%v db=%v, want 200 on sqlite", observed["n"], observed["db"])
	}
	for _, f := range []string{"events_per_s", "cpu_us_per_event", "hot_dropped"} {
		if _, ok := observed[f].(float64); !ok {
			t.Errorf("observed line: field %q missing or not a number: %s", f, lines[1])
		}
	}
	if rounds, ok := observed["rounds_events_per_s"].([]any); !ok || len(rounds) != 2 {
		t.Errorf("observed line: want the rates of 2 rounds: %s", lines[1])
	}
	notes, _ := observed["notes"].([]any)
	var joined []string
	for _, n := range notes {
		joined = append(joined, n.(string))
	}
	// 220 events (20 warm-up + 200), each with a send and a process span.
	for _, want := range []string{"tracer=sdk/always_sample/batch/discard", "meter=sdk/manual_reader", "spans_exported=440", "metric_points="} {
		if !strings.Contains(strings.Join(joined, " "), want) {
			t.Errorf("observed notes %q lack %q", joined, want)
		}
	}
	if s["summary"] != true {
		t.Fatalf("last line is not the summary: %s", lines[2])
	}
	if s["end_to_end_per_s"] != e2e["events_per_s"] || s["observed_per_s"] != observed["events_per_s"] {
		t.Errorf("summary rates %v, %v; want the lines' %v, %v", s["end_to_end_per_s"], s["observed_per_s"], e2e["events_per_s"], observed["events_per_s"])
	}
	cost, ok := s["observability_cost"].(float64)
	if !ok || cost >= 1 {
		t.Errorf("summary: observability_cost = %v: %s", s["observability_cost"], lines[2])
	}
}

// TestSummaryObservedTarget checks the observability_cost target edges:
// 0.05 is met, 0.0501 missed; and the summary text gives both rates.
func TestSummaryObservedTarget(t *testing.T) {
	b := &bench{opts: &options{db: "sqlite", observe: true, observeSample: 1}, e2eRate: 10000, observedRate: 9500}
	s := b.summary()
	if !s.TargetsMet || *s.ObservabilityCost != 0.05 || *s.ObservedPerS != 9500 || *s.EndToEndPerS != 10000 {
		t.Errorf("0.05: targets_met=%v missed=%v cost=%v", s.TargetsMet, s.TargetsMissed, *s.ObservabilityCost)
	}
	b.observedRate = 9499
	s = b.summary()
	want := []string{"observability_cost <= 0.05"}
	if s.TargetsMet || *s.ObservabilityCost != 0.0501 || strings.Join(s.TargetsMissed, "|") != strings.Join(want, "|") {
		t.Errorf("0.0501: targets_met=%v missed=%q cost=%v, want %q", s.TargetsMet, s.TargetsMissed, *s.ObservabilityCost, want)
	}
	var out bytes.Buffer
	(&printer{w: &out}).summary(s)
	for _, f := range []string{"observability_cost 0.0501 (1 - observed/e2e: 9499.0 vs 10000.0 events/s, traces always_sample, target <= 0.05)", "MISSED: observability_cost <= 0.05"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("summary line lacks %q: %s", f, out.String())
		}
	}
	// A sampled run says so beside the cost.
	b.opts.observeSample = 0.1
	if s := b.summary(); s.ObservedSampling != "parentbased_ratio_0.1" {
		t.Errorf("-observe-sample 0.1: observed_sampling %q", s.ObservedSampling)
	}
	// Without the observed scenario the summary has no such field.
	if s := (&bench{opts: &options{db: "sqlite"}, e2eRate: 10000}).summary(); s.ObservabilityCost != nil || s.ObservedPerS != nil {
		t.Errorf("no observed scenario: cost %v, observed %v", s.ObservabilityCost, s.ObservedPerS)
	}
}

// TestObserveFlags: observed_end_to_end runs by default only with
// -observe, needs end_to_end, and a mismatch between -observe and
// -scenarios is a usage error.
func TestObserveFlags(t *testing.T) {
	o, err := parseFlags([]string{"-db", "sqlite"}, &bytes.Buffer{})
	if err != nil || o.has(scenarioObservedE2E) {
		t.Errorf("without -observe: scenarios %v, %v", o.scenarios, err)
	}
	o, err = parseFlags([]string{"-db", "sqlite", "-observe"}, &bytes.Buffer{})
	if err != nil || !o.has(scenarioObservedE2E) || !o.has(scenarioEndToEnd) || !o.has(scenarioFloor) {
		t.Errorf("-observe: scenarios %v, %v", o.scenarios, err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-scenarios", "end_to_end,observed_end_to_end"}, "-scenarios: observed_end_to_end needs -observe"},
		{[]string{"-observe", "-scenarios", "observed_end_to_end"}, "observed_end_to_end is measured against end_to_end (observability_cost), so it needs end_to_end"},
		{[]string{"-observe", "-scenarios", "floor,end_to_end"}, "-observe: -scenarios does not select observed_end_to_end"},
		{[]string{"-observe", "-observe-sample", "0"}, "-observe-sample must be more than 0 and at most 1"},
		{[]string{"-observe", "-observe-sample", "1.5"}, "-observe-sample must be more than 0 and at most 1"},
		{[]string{"-observe", "-observe-sample", "NaN"}, "-observe-sample must be more than 0 and at most 1"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: stderr %q does not contain %q", tc.args, errOut.String(), tc.msg)
		}
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &errOut); code != 0 {
		t.Errorf("-h: exit status %d, want 0", code)
	}
	for _, s := range []string{"-observe", "observed_end_to_end", "observability_cost", "1 - observed_end_to_end rate / end_to_end",
		"AlwaysSample", "ManualReader", "target <= 0.05", "-observe-sample", "TraceIDRatioBased"} {
		if !strings.Contains(errOut.String(), s) {
			t.Errorf("-h output lacks %q", s)
		}
	}
}
