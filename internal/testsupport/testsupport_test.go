package testsupport_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"
)

// fatalTB records Fatalf and ends its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg chan string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitForWakesOnSignal(t *testing.T) {
	var ready atomic.Bool
	wake := make(chan struct{})
	go func() {
		ready.Store(true)
		close(wake)
	}()
	testsupport.WaitFor(t, 5*time.Second, "ready", ready.Load, nil, wake)
}

func TestWaitForFailsAtDeadline(t *testing.T) {
	f := &fatalTB{TB: t, msg: make(chan string, 1)}
	go testsupport.WaitFor(f, 10*time.Millisecond, "never", func() bool { return false })
	msg := testsupport.Recv(t, 5*time.Second, f.msg, "the failure")
	if !strings.Contains(msg, "waiting for never") {
		t.Fatalf("failure %q does not name the condition", msg)
	}
}

func TestLogBufferLines(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	logger.Info("one", "k", 1)
	logger.Debug("two", "k", 2)
	logger.Warn("three", "k", 1)
	if got := logs.Count("k=1"); got != 2 {
		t.Fatalf("Count(k=1) = %d, want 2:\n%s", got, logs)
	}
	if l := logs.Lines("level=DEBUG"); len(l) != 1 || !strings.HasSuffix(l[0], "k=2") {
		t.Fatalf("Lines(level=DEBUG) = %q", l)
	}
}

func TestClock(t *testing.T) {
	c := testsupport.NewClock(testsupport.Epoch)
	if got := c.Advance(time.Minute); !got.Equal(testsupport.Epoch.Add(time.Minute)) || !c.Now().Equal(got) {
		t.Fatalf("Advance = %v, Now = %v", got, c.Now())
	}
	c.Set(testsupport.Epoch)
	if !c.Now().Equal(testsupport.Epoch) {
		t.Fatalf("Set: Now = %v", c.Now())
	}
}

// Freeze returns once every thread of the process is stopped; a process
// that is not there is an error, not a wait.
func TestFreeze(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := testsupport.Freeze(cmd.Process, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(stat); s[strings.LastIndexByte(s, ')')+2] != 'T' {
		t.Errorf("after Freeze: %s, want state T", s)
	}
	if err := testsupport.Thaw(cmd.Process); err != nil {
		t.Fatal(err)
	}
	if err := testsupport.WaitStopped(cmd.Process.Pid, 100*time.Millisecond); err == nil {
		t.Error("WaitStopped of a running process returned nil")
	}
	if err := testsupport.WaitStopped(1<<30, time.Millisecond); err == nil {
		t.Error("WaitStopped of a missing process returned nil")
	}
}
