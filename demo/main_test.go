package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// envRunMain makes the test binary run the command's main, for the tests
// of its command line.
const envRunMain = "OUTBOX_DEMO_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Args = append([]string{"demo"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// An argument that is not a flag ("go run ./demo f.db", -keep forgotten)
// is a usage error (exit status 2), not a run on a temporary file that is
// then removed.
func TestDemoRejectsArguments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keep := filepath.Join(t.TempDir(), "demo.db")
	cmd := exec.CommandContext(ctx, os.Args[0], keep)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("demo %s: %v, want exit status 2; stderr:\n%s", keep, err, stderr.String())
	}
	if want := fmt.Sprintf("demo: unexpected argument %q", keep); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
}

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

// A -keep path that exists is refused: the walkthrough's figures are
// those of a new database, and an earlier run's rows would add to them.
func TestDemoKeepRefusesAnExistingFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := run(ctx, io.Discard, path, false); err != nil {
		t.Fatalf("first run with -keep %s: %v", path, err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	err = run(ctx, io.Discard, path, false)
	if err == nil || !strings.HasPrefix(err.Error(), "-keep "+path+": the file exists") {
		t.Fatalf("second run with -keep %s: error %v, want one starting with \"-keep %s: the file exists\"", path, err, path)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the kept file changed on the refused run (read error %v)", err)
	}
}
