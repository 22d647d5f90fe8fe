package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunHistorySQLiteTiny runs the history scenario in process on SQLite
// with a small seeded table and checks its line and the summary's fields.
func TestRunHistorySQLiteTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-scenarios", "history", "-n", "200", "-rounds", "1", "-warmup", "20",
		"-history-done", "3000", "-history-dead", "60", "-poll-interval", "200ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "history: seeded 3000 DONE and 60 DEAD rows in") {
		t.Errorf("stderr lacks the seeding time:\n%s", errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want the history line and the summary:\n%s", len(lines), out.String())
	}
	var line, sum map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &sum); err != nil {
		t.Fatal(err)
	}
	if line["scenario"] != scenarioHistory || line["history_rows"] != 3060.0 {
		t.Errorf("history line: %s", lines[0])
	}
	for _, f := range []string{"events_per_s", "seed_s", "history_e2e_per_s", "publish_purge_per_s", "purge_rows_per_s", "purge_alone_rows_per_s"} {
		if _, ok := line[f].(float64); !ok {
			t.Errorf("history line: field %q missing or not a number: %s", f, lines[0])
		}
	}
	// The first purge (alone) removes every seeded row past retention,
	// about three quarters: the purge during publishing may find none.
	if line["purge_alone_rows_per_s"].(float64) <= 0 {
		t.Errorf("the purge removed nothing: %s", lines[0])
	}
	for _, f := range []string{"history_publish_ratio", "history_e2e_ratio", "purge_keeps_up", "purge_cost"} {
		if _, ok := sum[f].(float64); !ok {
			t.Errorf("summary: field %q missing or not a number: %s", f, lines[1])
		}
	}
}

// TestHistoryFlags checks the history flags' errors and that history runs
// only when named.
func TestHistoryFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-history-done", "-1"}, "-history-done and -history-dead must not be negative"},
		{[]string{"-history-dead", "-5"}, "-history-done and -history-dead must not be negative"},
		{[]string{"-history-pause-factor", "100"}, "-history-pause-factor must be -1 or 0..99"},
		{[]string{"-history-pause-factor", "-2"}, "-history-pause-factor must be -1 or 0..99"},
		{[]string{"-history-pause-factor", "NaN"}, "-history-pause-factor must be -1 or 0..99"},
		{[]string{"-history-purge-rate", "-1"}, "-history-purge-rate must be 0..1000"},
		{[]string{"-history-purge-batch", "-1"}, "-history-purge-batch must be 0..10000"},
		{[]string{"-history-purge-batch", "10001"}, "-history-purge-batch must be 0..10000"},
	} {
		tc.args = append(tc.args, "-scenarios", "floor,publish,end_to_end,history")
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: stderr %q does not contain %q", tc.args, errOut.String(), tc.msg)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != 0 {
		t.Errorf("-h: exit status %d, want 0", code)
	}
	for _, s := range []string{"history_publish_ratio", "purge_keeps_up", "purge_cost", "-history-done", "-history-dead", "-history-pause-factor", "-history-purge-rate", "-history-purge-batch"} {
		if !strings.Contains(errOut.String(), s) {
			t.Errorf("-h output lacks %q", s)
		}
	}
	o, err := parseFlags([]string{"-db", "sqlite"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(o.scenarios, scenarioHistory) || o.historyDone != defaultHistoryDone || o.historyDead != defaultHistoryDead {
		t.Errorf("defaults: scenarios %v, rows %d/%d", o.scenarios, o.historyDone, o.historyDead)
	}
	if o.purgeBatch != 0 {
		t.Errorf("default purge batch %d, want 0 (the package's)", o.purgeBatch)
	}
	if o, err = parseFlags([]string{"-db", "sqlite", "-history-purge-batch", "5000", "-scenarios", "floor,publish,end_to_end,history"}, &bytes.Buffer{}); err != nil || o.purgeBatch != 5000 {
		t.Errorf("-history-purge-batch 5000: purge batch %d, err %v", o.purgeBatch, err)
	}
	// A flag of scenarios none of which runs would be ignored: refused.
	for _, args := range [][]string{
		{"-history-purge-batch", "5000"},
		{"-payload", "1KiB", "-scenarios", "floor,publish"},
		{"-observe-sample", "0.5"},
		{"-dashboard-rows", "10"},
		{"-recovery-n", "10", "-scenarios", "end_to_end"},
	} {
		if _, err := parseFlags(append([]string{"-db", "sqlite"}, args...), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "selects none of the scenarios") {
			t.Errorf("%v: err = %v, want the flag refused", args, err)
		}
	}
}

// TestHistorySummaryTargets checks the history targets of the summary.
func TestHistorySummaryTargets(t *testing.T) {
	met := &bench{opts: &options{db: "sqlite"}, history: &historyMeasure{publish: 1000, publishPurge: 950,
		purgeDuring: 2500, publishRatio: 0.95, e2eRatio: 0.92, keepsUp: 2.6, purgeCost: 0.95}}
	if s := met.summary(); !s.TargetsMet {
		t.Errorf("targets met, summary says %v", s.TargetsMissed)
	}
	missed := &bench{opts: &options{db: "sqlite"}, history: &historyMeasure{publish: 1000, publishPurge: 800,
		purgeDuring: 1200, publishRatio: 0.7, e2eRatio: 0.8, keepsUp: 1.5, purgeCost: 0.8}}
	s := missed.summary()
	want := []string{"history_publish_ratio >= 0.90", "history_e2e_ratio >= 0.90", "purge_keeps_up >= 2.0", "purge_cost >= 0.90"}
	if !slices.Equal(s.TargetsMissed, want) {
		t.Errorf("missed %v, want %v", s.TargetsMissed, want)
	}
}
