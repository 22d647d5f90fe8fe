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

// An interrupt removes the temporary database all the same (SIGINT's
// default action ended the process before its deferred removal): the
// demo says it was interrupted and exits with status 130.
func TestDemoInterruptedRemovesItsTemporaryDatabase(t *testing.T) {
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), envRunMain+"=1", "TMPDIR="+tmp)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once the walkthrough printed its first line the database exists.
	first := make([]byte, 1)
	if _, err := io.ReadFull(stdout, first); err != nil {
		t.Fatal(err)
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "outbox-demo-*")); len(dirs) != 1 {
		t.Fatalf("temporary directories while the demo runs: %v, want one", dirs)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stdout) //nolint:errcheck // drained so the demo never blocks on its output
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		err = nil
	}
	// The demo may have finished before the signal came: exit 0 then.
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 130 || !strings.Contains(stderr.String(), "demo: interrupted")) {
		t.Errorf("interrupted demo: %v, want exit status 130 and \"demo: interrupted\"; stderr:\n%s", err, stderr.String())
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "outbox-demo-*")); len(dirs) != 0 {
		t.Errorf("left behind after the interrupt: %v", dirs)
	}
}
