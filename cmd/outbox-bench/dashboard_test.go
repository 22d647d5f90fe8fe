package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The dashboard scenario runs end to end on a small table and reports
// every page and both rates.
func TestRunDashboardTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-db", "sqlite", "-json", "-scenarios", "dashboard", "-n", "100", "-rounds", "1", "-warmup", "10",
		"-dashboard-rows", "2000", "-dashboard-loads", "3", "-dashboard-loaders", "2", "-dashboard-pause", "0"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	var r result
	if err := json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &r); err != nil {
		t.Fatal(err)
	}
	d := r.Dashboard
	if r.Scenario != scenarioDashboard || d == nil || d.Rows != 2000 || len(d.Pages) != 6 || d.LoadedRatio == nil ||
		len(d.QuietPerS) != 1 || len(d.LoadedPerS) != 1 || r.EventsPerS == nil {
		t.Fatalf("line: %s", out.String())
	}
	for _, p := range d.Pages {
		if p.Loads != 3 || p.P50ms == nil || p.P99ms == nil {
			t.Errorf("page %+v", p)
		}
	}
	for _, args := range [][]string{{"-dashboard-rows", "5"}, {"-dashboard-loads", "0"}, {"-dashboard-loaders", "0"}, {"-dashboard-pause", "-1s"}} {
		if code := run(ctx, append([]string{"-scenarios", "dashboard"}, args...), &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
