//go:build !unix

package testsupport

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Freeze stops process p until SIGCONT on Unix; elsewhere there is no
// such signal, and it returns an error wrapping errors.ErrUnsupported.
func Freeze(p *os.Process, timeout time.Duration) error {
	return fmt.Errorf("freeze process %d: %w", p.Pid, errors.ErrUnsupported)
}

// Thaw resumes a process Freeze stopped on Unix; elsewhere it returns an
// error wrapping errors.ErrUnsupported.
func Thaw(p *os.Process) error {
	return fmt.Errorf("thaw process %d: %w", p.Pid, errors.ErrUnsupported)
}

// WaitStopped waits for a stopped process on Unix; elsewhere it returns an
// error wrapping errors.ErrUnsupported.
func WaitStopped(pid int, timeout time.Duration) error {
	return fmt.Errorf("wait for process %d to stop: %w", pid, errors.ErrUnsupported)
}
