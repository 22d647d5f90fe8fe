package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// tailLines is how many log lines of a child are kept to explain its
// failure when -v is off.
const tailLines = 40

// childProc is a running child process.
type childProc struct {
	id        int
	cmd       *exec.Cmd
	ready     chan struct{} // closed when the child printed READY
	published chan int      // receives the count of a drain child's PUBLISHED line
	exited    chan struct{} // closed once the process exited and its pipes are drained
	exitErr   error         // valid once exited is closed

	mu   sync.Mutex
	tail []string // last log lines (ring of tailLines)
	next int
}

// startChild starts exe as child spec.ID. Its stdout carries the READY and
// PUBLISHED lines; its stderr (log lines) goes to logw with a prefix when
// logw is not nil, and is kept in a short tail either way.
func startChild(exe string, spec childSpec, logw io.Writer) (*childProc, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"="+string(js))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child %d: %w", spec.ID, err)
	}
	c := &childProc{id: spec.ID, cmd: cmd, ready: make(chan struct{}), published: make(chan int, 1),
		exited: make(chan struct{}), tail: make([]string, 0, tailLines)}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() {
		defer pipes.Done()
		readyOnce := sync.OnceFunc(func() { close(c.ready) })
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == lineReady:
				readyOnce()
			case strings.HasPrefix(line, linePublished):
				n, _ := strconv.Atoi(strings.TrimPrefix(line, linePublished))
				select {
				case c.published <- n:
				default:
				}
			default:
				c.keep(line)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		defer pipes.Done()
		prefix := fmt.Sprintf("child %d: ", spec.ID)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			c.keep(line)
			if logw != nil {
				fmt.Fprintln(logw, prefix+line)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		pipes.Wait()
		c.exitErr = cmd.Wait() // after the pipes are drained, as os/exec requires
		close(c.exited)
	}()
	return c, nil
}

// keep remembers a log line in the tail.
func (c *childProc) keep(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tail) < tailLines {
		c.tail = append(c.tail, line)
		return
	}
	c.tail[c.next] = line
	c.next = (c.next + 1) % tailLines
}

// lastLines returns the kept log lines, oldest first, indented.
func (c *childProc) lastLines() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tail) == 0 {
		return "  (no output)"
	}
	lines := append(append([]string(nil), c.tail[c.next:]...), c.tail[:c.next]...)
	return "  " + strings.Join(lines, "\n  ")
}

// kill sends SIGKILL (unless the child exited already) and waits for its exit.
func (c *childProc) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Kill() // fails only when the process is gone already
	<-c.exited
}

// terminate sends SIGTERM: the child closes its outbox and exits.
func (c *childProc) terminate() error {
	return c.cmd.Process.Signal(syscall.SIGTERM)
}

// exitedEarly describes a child that exited before the parent ended it.
func (c *childProc) exitedEarly() error {
	return fmt.Errorf("child %d exited on its own (%v); its last log lines:\n%s", c.id, c.exitErr, c.lastLines())
}
