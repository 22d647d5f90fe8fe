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
	stream *runStream // with -relay: the stream the children relay to
	kills  int
	lastID int // id of the last child started
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
	// The database and the stream are kept when a check or a child
	// fails, for the investigation, but not after an interrupt.
	failed := true
	keep := func() bool { return o.keep || (failed && ctx.Err() == nil) }
	var err error
	if o.relay != "" {
		// The stream first: a broker that cannot be reached leaves no
		// database behind.
		if t.stream, err = openStream(ctx, o.relay, o.relayURL); err != nil {
			t.logf("-relay: %v", err)
			return 1
		}
		defer func() {
			keep := keep()
			if err := t.stream.close(keep); err != nil {
				t.logf("cleanup: %v", err)
			}
			if keep {
				t.logf("stream kept: %s on %s", t.stream.name, t.stream.addr)
			}
		}()
		if o.verbose {
			t.logf("stream: %s on %s", t.stream.name, t.stream.addr)
		}
	}
	if t.db, err = openFresh(ctx, o, logger); err != nil {
		t.logf("cannot create the database: %v", err)
		return 1
	}
	defer func() {
		keep := keep()
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
	if t.stream != nil {
		if _, err := t.stream.copyTo(context.WithoutCancel(ctx), t.db.db); err != nil {
			t.logf("reading the stream back: %v", err)
			return 1
		}
	}
	r, err := check(context.WithoutCancel(ctx), t.db.db, o.tracksOrder(), o.ordered, t.stream != nil)
	if err != nil {
		t.logf("check: %v", err)
		return 1
	}
	r.db, r.cycles, r.seed, r.elapsed = o.db, t.kills, o.seed, time.Since(start)
	r.keys, r.ordered, r.procs, r.relay = o.keys, o.ordered, o.procs, o.relay
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
	s := childSpec{ID: id, DB: t.db.kind, DSN: t.db.childDSN, Seed: o.seed, Drain: drain,
		DrainPublish: drainPublish, Publishers: o.publishers, Rate: o.rate, Rollback: o.rollback,
		ListenerFail: o.listenerFail, Verbose: o.verbose, Keys: o.keys, Ordered: o.ordered}
	if t.stream != nil {
		s.Relay, s.RelayURL, s.RelaySubject = o.relay, o.relayURL, t.stream.subject
	}
	return s
}

// startNext starts the next child.
func (t *torture) startNext(drain bool) (*childProc, error) {
	t.lastID++
	return startChild(t.exe, t.spec(t.lastID, drain), t.logWriter())
}

// logWriter is where children's log lines go: stderr with -v, else nowhere
// (they are kept in a tail for error reports).
func (t *torture) logWriter() io.Writer {
	if t.opts.verbose {
		return t.stderr
	}
	return nil
}

// running is a child of the kill cycles and the time of its SIGKILL.
type running struct {
	c    *childProc
	kill time.Time
	life time.Duration
}

// cycles starts, SIGKILLs and restarts children, -procs of them at once:
// each is killed at its own time and replaced by a new one until -cycles
// children were started (or -duration is used up), and the last ones run
// to their own kill.
func (t *torture) cycles(ctx context.Context) error {
	o := &t.opts
	begin := time.Now()
	var live []*running
	defer func() {
		for _, r := range live {
			r.c.kill()
		}
	}()
	// exited receives every child once it exited; one that is still in
	// live then exited on its own.
	exited := make(chan *childProc)
	done := make(chan struct{})
	defer close(done)
	started := 0
	start := func() error {
		if o.cycles >= 0 && started >= o.cycles {
			return nil
		}
		life := t.life(started, time.Since(begin))
		if life <= 0 {
			return nil // -duration used up
		}
		c, err := t.startNext(false)
		if err != nil {
			return err
		}
		started++
		live = append(live, &running{c: c, kill: time.Now().Add(life), life: life})
		go func() {
			<-c.exited
			select {
			case exited <- c:
			case <-done:
			}
		}()
		return nil
	}
	for range o.procs {
		if err := start(); err != nil {
			return err
		}
	}
	for len(live) > 0 {
		next := 0
		for i, r := range live {
			if r.kill.Before(live[next].kill) {
				next = i
			}
		}
		r := live[next]
		timer := time.NewTimer(time.Until(r.kill))
		select {
		case <-timer.C:
		case c := <-exited:
			timer.Stop()
			for _, l := range live {
				if l.c == c {
					return c.exitedEarly()
				}
			}
			continue // one the parent killed
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("interrupted in cycle %d", t.kills+1)
		}
		live = append(live[:next], live[next+1:]...)
		r.c.kill()
		t.kills++
		if o.verbose {
			t.logf("cycle %d: SIGKILLed child %d after %v", t.kills, r.c.id, r.life.Round(time.Millisecond))
		}
		if err := start(); err != nil {
			return err
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
	if o.cycles < 0 { // as many cycles as fit
		if left < minRun {
			return 0
		}
		return min(uniform(o.minRun, o.maxRun), left)
	}
	// Every cycle asked for runs, each at least minRun, even when starting
	// the children took so much of -duration that the last ones end past
	// it.
	if left < minRun {
		return minRun
	}
	// Spread the remaining cycles over the time left: a mean share, ±50 %;
	// -procs children run at once.
	share := left * time.Duration(o.procs) / time.Duration(o.cycles-i)
	return max(minRun, min(uniform(share/2, share*3/2), left))
}

// readyTime bounds the final child's start at rate transactions per
// second (0: unpaced): readyTimeout, or twice the time its drainPublish
// transactions take at that rate when longer.
func readyTime(rate int) time.Duration {
	if rate > 0 {
		return max(readyTimeout, 2*time.Duration(drainPublish)*time.Second/time.Duration(rate))
	}
	return readyTimeout
}

// drain starts the final children (-procs of them), waits until no event
// is NEW or RETRY any more, and stops the children with SIGTERM.
func (t *torture) drain(ctx context.Context) error {
	var children []*childProc
	defer func() {
		for _, c := range children {
			c.kill() // whatever happens; a no-op after a clean exit
		}
	}()
	for range t.opts.procs {
		c, err := t.startNext(true)
		if err != nil {
			return err
		}
		children = append(children, c)
	}
	ready := readyTime(t.opts.rate)
	wait := time.NewTimer(ready)
	defer wait.Stop()
	for _, c := range children {
		select {
		case <-c.published:
		case <-c.exited:
			return c.exitedEarly()
		case <-wait.C:
			return fmt.Errorf("drain: child %d did not publish its %d transactions within %v; its last log lines:\n%s",
				c.id, drainPublish, ready, c.lastLines())
		case <-ctx.Done():
			return errors.New("interrupted while the final children started")
		}
	}

	deadline := time.Now().Add(t.opts.drainTimeout)
	var pending int
	for {
		if err := t.db.db.GetContext(ctx, &pending,
			"SELECT COUNT(*) FROM "+outboxTable+" WHERE status IN (0, 2)"); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		if err := sleepWatching(ctx, drainPoll, children); err != nil {
			return err
		}
	}
	var errs []error
	if pending > 0 {
		errs = append(errs, fmt.Errorf("drain: %d events still NEW or RETRY %v after the final children published (-drain-timeout); the last log lines of child %d:\n%s",
			pending, t.opts.drainTimeout, children[0].id, children[0].lastLines()))
	}
	for _, c := range children {
		if err := c.terminate(); err != nil {
			errs = append(errs, fmt.Errorf("SIGTERM child %d: %w", c.id, err))
		}
	}
	stop := time.NewTimer(stopTimeout)
	defer stop.Stop()
	for _, c := range children {
		select {
		case <-c.exited:
			if c.exitErr != nil {
				errs = append(errs, fmt.Errorf("child %d exited with %v after SIGTERM; its last log lines:\n%s",
					c.id, c.exitErr, c.lastLines()))
			}
		case <-stop.C:
			return errors.Join(append(errs, fmt.Errorf("child %d did not exit within %v of SIGTERM; its last log lines:\n%s",
				c.id, stopTimeout, c.lastLines()))...)
		}
	}
	return errors.Join(errs...)
}

// sleepWatching waits for d, failing when ctx ends or one of children
// exited (seen at the latest when d is over).
func sleepWatching(ctx context.Context, d time.Duration, children []*childProc) error {
	for _, c := range children {
		select {
		case <-c.exited:
			return c.exitedEarly()
		default:
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return errors.New("interrupted during the drain")
	}
}
