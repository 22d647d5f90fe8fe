package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// Timing of the parent.
const (
	// drainPublish is how many transactions the final child runs before it
	// only delivers: the hot path of a node that took over keeps working.
	drainPublish = 200
	// drainPoll is how often the parent looks for events not yet DONE.
	drainPoll = 100 * time.Millisecond
	// stopTimeout bounds a child's graceful exit after SIGTERM.
	stopTimeout = time.Minute
	// readyTimeout bounds the final child's start.
	readyTimeout = time.Minute
)

// lockedWriter serializes writes of the parent and of its children's log
// forwarders.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// torture is one parent run.
type torture struct {
	opts   options
	exe    string // this binary, re-executed as the children
	stdout io.Writer
	stderr io.Writer
	rng    *rand.Rand
	db     *freshDB
	kills  int
}

// run is the whole command in parent mode: parse args, torture, check,
// print the summary line. It returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stderr = &lockedWriter{w: stderr}
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-torture: %v (run outbox-torture -h for usage)\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "outbox-torture: cannot find this binary to re-execute it: %v\n", err)
		return 1
	}
	t := &torture{opts: opts, exe: exe, stdout: stdout, stderr: stderr, rng: newRand(opts.seed)}
	return t.run(ctx)
}

// newRand returns the parent's random source for seed (kill times).
func newRand(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x746f727475726521))
}

func (t *torture) run(ctx context.Context) int {
	start := time.Now()
	o := &t.opts
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(t.stderr, nil))
	}
	t.logf("db=%s seed=%d (repeat with -seed %d)", o.db, o.seed, o.seed)
	var err error
	if t.db, err = openFresh(ctx, o, logger); err != nil {
		t.logf("cannot create the database: %v", err)
		return 1
	}
	failed := true // keep the database when a check or a child fails
	defer func() {
		keep := o.keep || (failed && ctx.Err() == nil) // not after an interrupt
		if err := t.db.close(keep); err != nil {
			t.logf("cleanup: %v", err)
		}
		if keep {
			t.logf("database kept: %s", t.db.where)
		}
	}()
	if o.verbose {
		t.logf("database: %s", t.db.where)
	}

	if err := t.cycles(ctx); err != nil {
		t.logf("%v", err)
		return 1
	}
	drainErr := t.drain(ctx)
	if drainErr != nil {
		t.logf("%v", drainErr)
		if ctx.Err() != nil {
			return 1
		}
	}
	r, err := check(context.WithoutCancel(ctx), t.db.db)
	if err != nil {
		t.logf("check: %v", err)
		return 1
	}
	r.db, r.cycles, r.seed, r.elapsed = o.db, t.kills, o.seed, time.Since(start)
	fmt.Fprintln(t.stdout, r.line())
	if problems := r.problems(); len(problems) > 0 {
		for _, p := range problems {
			t.logf("FAIL: %s", p)
		}
		if err := r.explain(context.WithoutCancel(ctx), t.db.db, t.stderr); err != nil {
			t.logf("explain: %v", err)
		}
		return 1
	}
	if drainErr != nil {
		return 1
	}
	failed = false
	return 0
}

// logf prints one line on stderr.
func (t *torture) logf(format string, args ...any) {
	fmt.Fprintf(t.stderr, "outbox-torture: "+format+"\n", args...)
}

// spec returns the spec of child id.
func (t *torture) spec(id int, drain bool) childSpec {
	o := &t.opts
	return childSpec{ID: id, DB: t.db.kind, DSN: t.db.childDSN, Seed: o.seed, Drain: drain,
		DrainPublish: drainPublish, Publishers: o.publishers, Rate: o.rate, Rollback: o.rollback,
		ListenerFail: o.listenerFail, Verbose: o.verbose}
}

// logWriter is where children's log lines go: stderr with -v, else nowhere
// (they are kept in a tail for error reports).
func (t *torture) logWriter() io.Writer {
	if t.opts.verbose {
		return t.stderr
	}
	return nil
}

// cycles starts, SIGKILLs and restarts children.
func (t *torture) cycles(ctx context.Context) error {
	o := &t.opts
	begin := time.Now()
	for i := 0; o.cycles < 0 || i < o.cycles; i++ {
		life := t.life(i, time.Since(begin))
		if life <= 0 {
			break // -duration used up
		}
		c, err := startChild(t.exe, t.spec(i+1, false), t.logWriter())
		if err != nil {
			return err
		}
		timer := time.NewTimer(life)
		select {
		case <-timer.C:
		case <-c.exited:
			timer.Stop()
			return c.exitedEarly()
		case <-ctx.Done():
			timer.Stop()
			c.kill()
			return fmt.Errorf("interrupted in cycle %d", i+1)
		}
		c.kill()
		t.kills++
		if o.verbose {
			t.logf("cycle %d: SIGKILLed child %d after %v", i+1, c.id, life.Round(time.Millisecond))
		}
	}
	return nil
}

// life returns how long child i runs before its SIGKILL, given the time
// the cycles took so far; 0 ends the cycles (-duration used up).
func (t *torture) life(i int, spent time.Duration) time.Duration {
	o := &t.opts
	uniform := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(t.rng.Int64N(int64(hi-lo)+1))
	}
	if o.duration <= 0 {
		return uniform(o.minRun, o.maxRun)
	}
	left := o.duration - spent
	if left < minRun {
		return 0
	}
	if o.cycles < 0 { // as many cycles as fit
		return min(uniform(o.minRun, o.maxRun), left)
	}
	// Spread the remaining cycles over the time left: a mean share, ±50 %.
	share := left / time.Duration(o.cycles-i)
	return max(minRun, min(uniform(share/2, share*3/2), left))
}

// drain starts the final child, waits until no event is NEW or RETRY any
// more, and stops the child with SIGTERM.
func (t *torture) drain(ctx context.Context) error {
	c, err := startChild(t.exe, t.spec(t.kills+1, true), t.logWriter())
	if err != nil {
		return err
	}
	defer c.kill() // whatever happens; a no-op after a clean exit
	wait := time.NewTimer(readyTimeout)
	defer wait.Stop()
	select {
	case <-c.published:
	case <-c.exited:
		return c.exitedEarly()
	case <-wait.C:
		return fmt.Errorf("drain: child %d did not publish its %d transactions within %v; its last log lines:\n%s",
			c.id, drainPublish, readyTimeout, c.lastLines())
	case <-ctx.Done():
		return errors.New("interrupted while the final child started")
	}

	deadline := time.Now().Add(t.opts.drainTimeout)
	var pending int
	for {
		if err := t.db.db.GetContext(ctx, &pending,
			"SELECT COUNT(*) FROM "+outboxTable+" WHERE status IN (0, 2)"); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(drainPoll):
		case <-c.exited:
			return c.exitedEarly()
		case <-ctx.Done():
			return errors.New("interrupted during the drain")
		}
	}
	var drainErr error
	if pending > 0 {
		drainErr = fmt.Errorf("drain: %d events still NEW or RETRY %v after the final child published (-drain-timeout); its last log lines:\n%s",
			pending, t.opts.drainTimeout, c.lastLines())
	}
	if err := c.terminate(); err != nil {
		return errors.Join(drainErr, fmt.Errorf("SIGTERM child %d: %w", c.id, err))
	}
	stop := time.NewTimer(stopTimeout)
	defer stop.Stop()
	select {
	case <-c.exited:
		if c.exitErr != nil {
			return errors.Join(drainErr, fmt.Errorf("child %d exited with %v after SIGTERM; its last log lines:\n%s",
				c.id, c.exitErr, c.lastLines()))
		}
	case <-stop.C:
		return errors.Join(drainErr, fmt.Errorf("child %d did not exit within %v of SIGTERM; its last log lines:\n%s",
			c.id, stopTimeout, c.lastLines()))
	}
	return drainErr
}
