package testdb

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"
)

// serverProc is the process of a private database server ([MariaDB],
// [PostgresServer]): started and waited for until it answers, stopped
// cleanly, killed as in a crash, started again. Its methods fail the test
// that started the server and must be called from that test's goroutine.
type serverProc struct {
	t            testing.TB
	name         string         // "MariaDB", "PostgreSQL"
	stopSignal   syscall.Signal // the server's clean shutdown
	group        bool           // SIGKILL the whole process group (the server's children too)
	readyTimeout time.Duration
	stopTimeout  time.Duration
	addr         func() string
	logTail      func() string
	start        func() error // runs the server (through launch)

	mu   sync.Mutex // guards cmd and done; also the server's log writer
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
}

// Running reports whether the server process runs.
func (s *serverProc) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Stop shuts the server down cleanly (MariaDB: SIGTERM, as mysqladmin
// shutdown; PostgreSQL: SIGINT, the fast shutdown that ends open
// sessions) and waits until it has exited, so its port refuses
// connections; if it still runs after its stop timeout it is killed.
func (s *serverProc) Stop() {
	s.t.Helper()
	s.halt(s.stopSignal)
}

// Kill ends the server with SIGKILL (PostgreSQL: with every backend), as
// a crash, and waits until it has exited. The next Start runs crash
// recovery: committed transactions survive.
func (s *serverProc) Kill() {
	s.t.Helper()
	s.halt(syscall.SIGKILL)
}

// Freeze stops the server process with SIGSTOP: its port accepts
// connections that nothing answers, as a server that hangs. Thaw, or the
// end of the test, resumes it.
func (s *serverProc) Freeze() {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || !s.Running() {
		s.t.Fatalf("private %s on %s: Freeze while it does not run", s.name, s.addr())
	}
	s.t.Cleanup(func() { _ = testsupport.Thaw(cmd.Process) }) // before the server's own cleanup stops it
	if err := testsupport.Freeze(cmd.Process, 10*time.Second); err != nil {
		s.t.Fatalf("private %s: %v", s.name, err)
	}
}

// Thaw resumes a server Freeze stopped (SIGCONT).
func (s *serverProc) Thaw() {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		_ = testsupport.Thaw(cmd.Process)
	}
}

// Start starts the server again on the same data directory and port,
// after Stop or Kill, and waits until it answers.
func (s *serverProc) Start() {
	s.t.Helper()
	if s.Running() {
		s.t.Fatalf("private %s on %s: Start while it runs", s.name, s.addr())
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("private %s: %v\nlog:\n%s", s.name, err, s.logTail())
	}
}

// launch starts cmd and waits until ping succeeds, or fails if the
// process exits or does not answer within readyTimeout.
func (s *serverProc) launch(cmd *exec.Cmd, ping func(context.Context) error) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.NewTimer(s.readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before answering (%v)", cmd.Path, cmd.ProcessState)
		case <-deadline.C:
			s.halt(syscall.SIGKILL)
			return fmt.Errorf("%s did not answer on %s within %v: %w", cmd.Path, s.addr(), s.readyTimeout, err)
		case <-tick.C:
		}
	}
}

// halt sends sig to the server and waits until it has exited, sending
// SIGKILL if it still runs after stopTimeout. With group, SIGKILL goes to
// the whole process group and halt also waits until the group is empty,
// so a restart finds the server's resources free.
func (s *serverProc) halt(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	signal := func(sig syscall.Signal) {
		if sig == syscall.SIGKILL && s.group {
			killGroup(cmd.Process.Pid)
		}
		_ = cmd.Process.Signal(sig)
	}
	signal(sig)
	killed := sig == syscall.SIGKILL
	timer := time.NewTimer(s.stopTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.t.Errorf("private %s on %s did not exit within %v of %v: killing it", s.name, s.addr(), s.stopTimeout, sig)
		signal(syscall.SIGKILL)
		killed = true
		<-done
	}
	if s.group && killed {
		s.waitGroupGone(cmd.Process.Pid)
	}
}

// waitGroupGone waits until no process of the group pgid is left.
func (s *serverProc) waitGroupGone(pgid int) {
	deadline := time.Now().Add(s.stopTimeout)
	for time.Now().Before(deadline) {
		if !killGroup(pgid) {
			return // the group is empty
		}
		time.Sleep(10 * time.Millisecond) // polling the kernel, not synchronising with our code
	}
}
