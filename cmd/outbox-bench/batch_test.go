package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBatchScenario runs publish and batch on SQLite with tiny sizes: the
// batch line counts events (N, in N/10 transactions) and notes its events
// per transaction and DONE rate; the summary carries batch_speedup.
func TestBatchScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-n", "205", "-rounds", "1", "-warmup", "20",
		"-scenarios", "publish,batch"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want publish, batch and the summary:\n%s", len(lines), out.String())
	}
	var batch result
	if err := json.Unmarshal([]byte(lines[1]), &batch); err != nil {
		t.Fatal(err)
	}
	if batch.Scenario != scenarioBatch || batch.N != 200 || batch.EventsPerS == nil || *batch.EventsPerS <= 0 {
		t.Errorf("batch line = %s; want %s with n 200 (20 transactions of %d) and a rate", lines[1], scenarioBatch, batchSize)
	}
	if notes := strings.Join(batch.Notes, " "); !strings.Contains(notes, "events_per_tx=10") || !strings.Contains(notes, "done_events_per_s=") {
		t.Errorf("batch notes = %q", notes)
	}
	var s summary
	if err := json.Unmarshal([]byte(lines[2]), &s); err != nil {
		t.Fatal(err)
	}
	if s.BatchSpeedup == nil || *s.BatchSpeedup <= 0 {
		t.Errorf("summary = %s; want batch_speedup", lines[2])
	}
}

func TestBatchNeedsPublish(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-scenarios", "floor,batch"}, &out, &errOut); code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
	if msg := "batch is measured against publish"; !strings.Contains(errOut.String(), msg) {
		t.Errorf("stderr %q does not contain %q", errOut.String(), msg)
	}
	out.Reset()
	errOut.Reset()
	run(context.Background(), []string{"-h"}, &out, &errOut)
	for _, s := range []string{"batch_speedup", "batch rate / publish rate", "PublishAll"} {
		if !strings.Contains(errOut.String(), s) {
			t.Errorf("-h output lacks %q", s)
		}
	}
}
