package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The walkthrough prints all five scenarios and the final table.
func TestDemoRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, filepath.Join(t.TempDir(), "demo.db"), false); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	// The commit scenario shows the listener's latency (commit returned →
	// listener called) apart from the batched DONE write.
	if !regexp.MustCompile(`(?m)^   the listener was called (\S+ after the commit returned|before the commit had even returned): the hot path`).MatchString(out.String()) {
		t.Errorf("demo output lacks the listener latency:\n%s", out.String())
	}
	for _, want := range []string{"1. Commit", "2. Rollback", "coalesced batches (DoneFlushWindow 25ms)", "3. Overflow", "4. Failing listener", "5. Wildcard",
		"status DEAD  attempts 3", "DONE   1      9", "the email was sent 1 time", "DEAD   3      1", "NEW    0      0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// A -keep path that cannot be opened fails with the flag and the path in
// the message, not the driver's error alone.
func TestDemoKeepUnopenable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "no-such-dir", "demo.db")
	var out bytes.Buffer
	err := run(ctx, &out, path, false)
	if err == nil || !strings.HasPrefix(err.Error(), "-keep "+path+": ") {
		t.Fatalf("run with -keep %s: error %v, want one starting with \"-keep %s: \"", path, err, path)
	}
}
