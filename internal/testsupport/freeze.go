//go:build unix

package testsupport

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Freeze stops process p with SIGSTOP and returns once every thread of it
// is stopped, within timeout. The signal alone is not enough: kill
// returns before the target's threads have stopped, and a server went on
// to answer a request sent right after it (a NATS server refused a
// publish 0.3 ms after the signal). The caller resumes p with SIGCONT.
func Freeze(p *os.Process, timeout time.Duration) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", p.Pid, err)
	}
	return WaitStopped(p.Pid, timeout)
}

// Thaw resumes process p, stopped by Freeze, with SIGCONT.
func Thaw(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// WaitStopped waits until every thread of process pid is stopped (state T
// in /proc), within timeout.
func WaitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		running, err := runningThreads(pid)
		if err == nil && running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d threads still running", running)
			}
			return fmt.Errorf("process %d not stopped within %v: %w", pid, timeout, err)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// runningThreads counts the threads of pid that are not stopped.
func runningThreads(pid int) (int, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return 0, err
	}
	if len(stats) == 0 {
		return 0, fmt.Errorf("no threads of process %d in /proc", pid)
	}
	running := 0
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			if os.IsNotExist(err) { // a thread that exited
				continue
			}
			return 0, err
		}
		// "pid (comm) S ...": the state follows the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return 0, fmt.Errorf("unexpected %s: %q", f, s)
		}
		if st := s[i+2]; st != 'T' && st != 't' {
			running++
		}
	}
	return running, nil
}
