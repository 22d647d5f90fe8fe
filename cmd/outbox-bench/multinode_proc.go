package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Messages of the nodes the parent waits for, in order.
const (
	evReady     = "ready"
	evPublished = "published"
	evClosed    = "closed"
	evError     = "error"
)

// nodeWaitDelay bounds how long the parent waits for a node's pipes after
// the node exited or was killed.
const nodeWaitDelay = 10 * time.Second

// nodeGroup is the parent's handle on the running nodes. The nodes are
// killed when the scenario's context ends (an interrupt) or kill is
// called; a node whose parent dies sees its stdin close and exits by
// itself (runNode).
type nodeGroup struct {
	b      *bench
	nodes  []*nodeProc
	events chan nodeEvent
	cancel context.CancelFunc // kills every node still running
	quit   chan struct{}      // closed by kill: the readers stop forwarding
	once   sync.Once
}

// nodeProc is one node process.
type nodeProc struct {
	spec    nodeSpec
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *lineWriter
	exited  chan struct{} // closed once Wait returned, waitErr set
	waitErr error

	pid       int
	published nodeMsg
	closed    nodeMsg
}

// nodeEvent is a message of node i, or its stdout's end (eof).
type nodeEvent struct {
	node int
	msg  nodeMsg
	eof  bool
	err  error // a line that is not a message
}

// startNodes starts the -nodes processes on the database f, each with its
// share of the N events and an id file in dir.
// With floor they run the floor's transaction instead of an outbox.
func (b *bench) startNodes(parent context.Context, f *freshDB, dir string, floor bool) (*nodeGroup, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start the nodes: %w", err)
	}
	k := b.opts.nodes
	ctx, cancel := context.WithCancel(parent)
	g := &nodeGroup{b: b, events: make(chan nodeEvent, 8*k), cancel: cancel, quit: make(chan struct{})}
	var errMu sync.Mutex // the nodes' stderr lines, one at a time
	for i := range k {
		spec := nodeSpec{Index: i + 1, DB: f.kind, DSN: f.dsn, N: b.opts.multiN / k, Workers: b.opts.workers,
			Warmup: b.opts.warmup, PollEvery: b.opts.pollEvery, Backlog: b.opts.backlog,
			DoneWindow: b.opts.doneWindow, DoneBatch: b.opts.doneBatch, MaxHeld: b.opts.maxHeld,
			MaxOpen: b.opts.maxOpen, Timeout: b.opts.timeout, Verbose: b.opts.verbose,
			IDFile: filepath.Join(dir, fmt.Sprintf("node%d.ids", i+1)), Floor: floor}
		if b.opts.cpuProfile != "" {
			spec.CPUProfile = fmt.Sprintf("%s.node%d", b.opts.cpuProfile, i+1)
			if floor {
				spec.CPUProfile += ".floor"
			}
		}
		if i < b.opts.multiN%k {
			spec.N++
		}
		if err := g.start(ctx, exe, spec, &errMu); err != nil {
			g.kill()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
	}
	return g, nil
}

// start starts one node.
func (g *nodeGroup) start(ctx context.Context, exe string, spec nodeSpec, errMu *sync.Mutex) error {
	js, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(js))
	cmd.WaitDelay = nodeWaitDelay
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	nd := &nodeProc{spec: spec, cmd: cmd, stdin: stdin, exited: make(chan struct{}),
		stderr: &lineWriter{mu: errMu, w: g.b.stderr, prefix: fmt.Sprintf("outbox-bench: node %d: ", spec.Index)}}
	cmd.Stderr = nd.stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	i := len(g.nodes)
	g.nodes = append(g.nodes, nd)
	go g.read(i, pr)
	go func() {
		nd.waitErr = cmd.Wait()
		pw.Close()
		nd.stderr.flush()
		close(nd.exited)
	}()
	return nil
}

// read forwards node i's messages until its stdout ends.
func (g *nodeGroup) read(i int, r io.ReadCloser) {
	defer r.Close()
	send := func(e nodeEvent) bool {
		select {
		case g.events <- e:
			return true
		case <-g.quit:
			return false
		}
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var m nodeMsg
		e := nodeEvent{node: i}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			e.err = fmt.Errorf("node %d wrote %q", i+1, sc.Text())
		}
		e.msg = m
		if !send(e) {
			break
		}
	}
	_, _ = io.Copy(io.Discard, r) // after quit: keep the node from blocking
	send(nodeEvent{node: i, eof: true})
}

// awaitAll waits until every node sent the message ev (at most -timeout),
// recording it. An error message, another message, a node's exit or an
// interrupt ends the wait with an error.
func (g *nodeGroup) awaitAll(ctx context.Context, ev string) error {
	timer := time.NewTimer(g.b.opts.timeout)
	defer timer.Stop()
	got := make([]bool, len(g.nodes))
	for left := len(g.nodes); left > 0; {
		select {
		case e := <-g.events:
			switch {
			case e.eof && g.nodes[e.node].closed.Ev == evClosed:
				// The end of a node that said its last message.
			case e.err == nil && e.msg.Ev == ev && !got[e.node]:
				got[e.node] = true
				left--
				g.record(e.node, e.msg)
			default:
				return g.unexpected(e, ev)
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("timed out after %v waiting for every node to say %q", g.b.opts.timeout, ev)
		}
	}
	return nil
}

// record keeps what node i said.
func (g *nodeGroup) record(i int, m nodeMsg) {
	nd := g.nodes[i]
	switch m.Ev {
	case evReady:
		nd.pid = m.PID
		g.b.log.Info("multinode: node ready", "node", i+1, "pid", m.PID)
	case evPublished:
		nd.published = m
	case evClosed:
		nd.closed = m
	}
}

// quiet returns an error if a node said anything or exited; the nodes are
// silent while the parent polls the table.
func (g *nodeGroup) quiet() error {
	select {
	case e := <-g.events:
		return g.unexpected(e, "")
	default:
		return nil
	}
}

// unexpected describes event e, received while waiting for want.
func (g *nodeGroup) unexpected(e nodeEvent, want string) error {
	node := e.node + 1
	switch {
	case e.err != nil:
		return e.err
	case e.eof:
		nd := g.nodes[e.node]
		<-nd.exited // its output ended: it exited or is about to
		return fmt.Errorf("node %d exited unexpectedly (%v); its stderr is above", node, nd.waitErr)
	case e.msg.Ev == evError:
		return fmt.Errorf("node %d: %s", node, e.msg.Err)
	case want == "":
		return fmt.Errorf("node %d said %q unexpectedly", node, e.msg.Ev)
	}
	return fmt.Errorf("node %d said %q, want %q", node, e.msg.Ev, want)
}

// sendAll writes the command to every node.
func (g *nodeGroup) sendAll(cmd string) error {
	for i, nd := range g.nodes {
		if _, err := io.WriteString(nd.stdin, cmd+"\n"); err != nil {
			return fmt.Errorf("node %d: send %q: %w", i+1, cmd, err)
		}
	}
	return nil
}

// wait closes the nodes' stdin and waits for them to exit (each at most
// -timeout), reporting a failed exit.
func (g *nodeGroup) wait() error {
	var errs []error
	for i, nd := range g.nodes {
		nd.stdin.Close()
		select {
		case <-nd.exited:
		case <-time.After(g.b.opts.timeout):
			g.kill()
			<-nd.exited
		}
		if nd.waitErr != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i+1, nd.waitErr))
		}
	}
	return errors.Join(errs...)
}

// kill kills every node still running and waits until they are gone.
func (g *nodeGroup) kill() {
	g.once.Do(func() {
		g.cancel()
		close(g.quit)
	})
	for _, nd := range g.nodes {
		<-nd.exited
	}
}

// publishSpan returns the earliest start and the latest end of the
// nodes' publishing.
func (g *nodeGroup) publishSpan() (first, last time.Time) {
	for i, nd := range g.nodes {
		s, e := time.Unix(0, nd.published.StartNs), time.Unix(0, nd.published.EndNs)
		if i == 0 || s.Before(first) {
			first = s
		}
		if i == 0 || e.After(last) {
			last = e
		}
	}
	return first, last
}

// lineWriter writes a node's stderr to w line by line, each line
// prefixed, under a mutex shared by the nodes so that their lines do not
// interleave.
type lineWriter struct {
	mu      *sync.Mutex
	w       io.Writer
	prefix  string
	partial []byte // only touched by the one goroutine exec copies with
}

// Write writes the complete lines of p and keeps the rest.
func (l *lineWriter) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	end := bytes.LastIndexByte(l.partial, '\n')
	if end < 0 {
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range bytes.SplitSeq(l.partial[:end], []byte("\n")) {
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, line)
	}
	l.partial = append(l.partial[:0], l.partial[end+1:]...)
	return len(p), nil
}

// flush writes a last line without a newline.
func (l *lineWriter) flush() {
	if len(l.partial) > 0 {
		_, _ = l.Write([]byte("\n"))
	}
}
