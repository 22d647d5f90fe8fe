package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/poller"
)

// nodeEnv names the environment variable that makes the binary a node of
// the multinode scenario instead of the command: its value is the node's
// nodeSpec as JSON. The parent sets it when it re-executes itself; it is
// not meant to be set by hand.
const nodeEnv = "OUTBOX_BENCH_NODE"

// orphanGrace is how long a node whose parent went away (its stdin closed
// before "stop") may take to wind down before it exits hard.
const orphanGrace = 5 * time.Second

// nodeSpec is what a node is told by its parent: the shared database and
// the options of the scenario.
type nodeSpec struct {
	Index      int           `json:"index"`
	DB         string        `json:"db"`  // "sqlite", "mysql" or "postgres"
	DSN        string        `json:"dsn"` // the SQLite file or the DSN of the scenario's database
	N          int           `json:"n"`   // events this node publishes
	Workers    int           `json:"workers"`
	Warmup     int           `json:"warmup"`
	PollEvery  time.Duration `json:"poll_every"`
	Backlog    time.Duration `json:"backlog"`
	DoneWindow time.Duration `json:"done_window"`
	DoneBatch  int           `json:"done_batch"`
	MaxHeld    int64         `json:"max_held"`
	MaxOpen    int           `json:"max_open"`
	Timeout    time.Duration `json:"timeout"`
	Verbose    bool          `json:"verbose"`
	// Floor makes the node run the floor's transaction (multinode_floor)
	// instead of an outbox.
	Floor bool `json:"floor,omitempty"`
	// CPUProfile, when set, receives the node's CPU profile from "go" to
	// "stop" (-cpuprofile FILE gives FILE.node1, FILE.node2, …).
	CPUProfile string `json:"cpu_profile,omitempty"`
	// IDFile receives the id of every event of eventType the node's
	// listener saw, one per line, once the node stopped.
	IDFile string `json:"id_file"`
}

// Commands a node reads on its stdin, one per line.
const (
	cmdGo   = "go"   // start publishing
	cmdStop = "stop" // close the outbox, write the id file, report and exit
)

// nodeMsg is one JSON line a node writes on its stdout.
type nodeMsg struct {
	// Ev is the message: "ready" (outbox started, warm-up published;
	// for the floor: warm-up done),
	// "published" (every event of the node committed), "closed" (outbox
	// closed, id file written; the last message) or "error".
	Ev  string `json:"ev"`
	PID int    `json:"pid,omitempty"`
	// StartNs and EndNs bound the node's publishing (Unix nanoseconds).
	StartNs int64 `json:"start_ns,omitempty"`
	EndNs   int64 `json:"end_ns,omitempty"`
	N       int   `json:"n,omitempty"`
	// Seen is the number of listener calls for eventType (duplicates
	// included).
	Seen         int     `json:"seen,omitempty"`
	HotDropped   int64   `json:"hot_dropped,omitempty"`
	ColdEnqueued int64   `json:"cold_enqueued,omitempty"`
	LeaseLost    int64   `json:"lease_lost,omitempty"`
	CPUus        float64 `json:"cpu_us,omitempty"` // process CPU from "go" to "stop"
	Err          string  `json:"err,omitempty"`
}

// runNodeFromEnv runs the node role when nodeEnv is set and returns its
// exit status; ok is false for the ordinary command.
func runNodeFromEnv() (code int, ok bool) {
	spec, ok := os.LookupEnv(nodeEnv)
	if !ok {
		return 0, false
	}
	return runNode(spec, os.Stdin, os.Stdout, os.Stderr), true
}

// runNode is one node of the multinode scenario: it opens the shared
// database, starts a full outbox on it (dispatcher and poller under an
// owner token of its own, the same configuration as end_to_end), publishes
// the warm-up events, says "ready", publishes its N events on W writers
// when told "go", and on "stop" closes the outbox, writes the ids its
// listener saw and reports its counts. When stdin closes early (the parent
// is gone) it stops at once and exits with status 3, after at most
// orphanGrace.
func runNode(specJSON string, stdin io.Reader, stdout, stderr io.Writer) int {
	var spec nodeSpec
	out := &nodeOut{w: stdout}
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		out.fail(fmt.Errorf("bad %s: %w", nodeEnv, err))
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmds := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			cmds <- strings.TrimSpace(sc.Text())
		}
		// The parent is gone (or closed the pipe): give up.
		cancel()
		time.AfterFunc(orphanGrace, func() { os.Exit(3) })
	}()
	if err := node(ctx, spec, cmds, out, stderr); err != nil {
		if ctx.Err() != nil {
			return 3
		}
		out.fail(err)
		return 1
	}
	return 0
}

// nodeOut writes a node's messages.
type nodeOut struct {
	mu sync.Mutex
	w  io.Writer
}

// send writes one message line.
func (o *nodeOut) send(m nodeMsg) {
	b, _ := json.Marshal(m) // plain fields: cannot fail
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, "%s\n", b)
}

// fail reports err.
func (o *nodeOut) fail(err error) { o.send(nodeMsg{Ev: "error", Err: err.Error()}) }

// node is runNode once the spec is read.
func node(ctx context.Context, spec nodeSpec, cmds <-chan string, out *nodeOut, stderr io.Writer) error {
	opts := &options{db: spec.DB, dsn: spec.DSN, n: spec.N, workers: spec.Workers, warmup: spec.Warmup,
		pollEvery: spec.PollEvery, backlog: spec.Backlog, doneWindow: spec.DoneWindow, doneBatch: spec.DoneBatch,
		maxHeld: spec.MaxHeld, maxOpen: spec.MaxOpen, timeout: spec.Timeout, verbose: spec.Verbose}
	logger := slog.New(slog.DiscardHandler)
	if spec.Verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b := &bench{opts: opts, log: logger, stderr: stderr}
	f, err := openShared(spec.DB, spec.DSN)
	if err != nil {
		return err
	}
	f.setup(opts)
	var w nodeWork
	if spec.Floor {
		w, err = b.floorWork(ctx, f)
	} else {
		w, err = b.outboxWork(ctx, f)
	}
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			w.close()
		}
	}()
	out.send(nodeMsg{Ev: evReady, PID: os.Getpid()})
	if err := await(ctx, cmds, cmdGo); err != nil {
		return err
	}
	stopProfile, err := startProfile(spec.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	cpu := cpuTime()
	start := time.Now()
	prefix := fmt.Sprintf("node%d", spec.Index)
	if _, err := runPool(ctx, spec.Workers, spec.N, func(ctx context.Context, i int) error {
		return w.tx(ctx, prefix, i)
	}); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	out.send(nodeMsg{Ev: evPublished, StartNs: start.UnixNano(), EndNs: time.Now().UnixNano(), N: spec.N})
	if err := await(ctx, cmds, cmdStop); err != nil {
		return err
	}
	closed = true
	msg := w.close()
	stopProfile()
	msg.Ev = evClosed
	msg.CPUus = float64(cpuTime()-cpu) / float64(time.Microsecond)
	if w.ids != nil {
		if msg.Seen, err = w.ids.write(spec.IDFile); err != nil {
			return err
		}
	}
	out.send(msg)
	return nil
}

// nodeWork is what a node runs: the floor's transaction, or a publish
// through its outbox.
type nodeWork struct {
	tx    func(ctx context.Context, prefix string, i int) error
	close func() nodeMsg // ends the work and returns its counts
	ids   *idLog         // the listener's ids (nil for the floor)
}

// outboxWork starts the node's outbox on f, with the warm-up.
func (b *bench) outboxWork(ctx context.Context, f *freshDB) (nodeWork, error) {
	ids := &idLog{}
	h, err := b.startOn(ctx, f, outboxSetup{poller: poller.Config{}, listen: ids.listen})
	if err != nil {
		return nodeWork{}, err
	}
	return nodeWork{
		tx: func(ctx context.Context, prefix string, i int) error {
			return h.publish(ctx, eventType, orderRef(prefix, i), orderAmount(i), -1)
		},
		close: func() nodeMsg {
			h.close()
			return nodeMsg{HotDropped: h.m.hotDropped.Load(), ColdEnqueued: h.m.coldEnqueued.Load(),
				LeaseLost: h.m.leaseLost.Load()}
		},
		ids: ids,
	}, nil
}

// floorWork prepares the floor's transaction on f, with the warm-up.
func (b *bench) floorWork(ctx context.Context, f *freshDB) (nodeWork, error) {
	close := func() nodeMsg { b.closeDB(f); return nodeMsg{} }
	tx, err := b.floorTx(ctx, f)
	if err == nil {
		_, err = runPool(ctx, b.opts.workers, b.opts.warmup, func(ctx context.Context, i int) error {
			return tx(ctx, "warm", i)
		})
	}
	if err != nil {
		close()
		return nodeWork{}, err
	}
	return nodeWork{tx: tx, close: close}, nil
}

// startProfile starts a CPU profile into path, if not "", and returns
// the function that ends it (safe to call twice).
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}

// await waits for the command want on cmds; another command is an error.
func await(ctx context.Context, cmds <-chan string, want string) error {
	select {
	case c := <-cmds:
		if c != want {
			return fmt.Errorf("got command %q, want %q", c, want)
		}
		return nil
	case <-ctx.Done():
		return errors.New("the parent closed stdin")
	}
}

// openShared opens the scenario's database that the parent created; the
// harness closes it, and only the parent removes it.
func openShared(kind, dsn string) (*freshDB, error) {
	var (
		db  *sqlx.DB
		err error
	)
	switch kind {
	case "sqlite":
		db, err = sqlite.Open(dsn)
	case "mysql":
		db, err = sqlx.Open("mysql", dsn)
	case "postgres":
		db, err = sqlx.Open("pgx", dsn)
	default:
		err = fmt.Errorf("unknown database %q", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", kind, err)
	}
	return &freshDB{db: db, kind: kind, dsn: dsn, cleanup: db.Close}, nil
}

// idLog records the id of every event the node's listener sees, in
// memory (ULID strings, a few MB for a million events), for the parent's
// exactly-once check.
type idLog struct {
	mu  sync.Mutex
	ids []string
}

// listen is the node's listener for eventType.
func (l *idLog) listen(_ context.Context, env outbox.Envelope) error {
	l.mu.Lock()
	l.ids = append(l.ids, env.ID())
	l.mu.Unlock()
	return nil
}

// write writes the ids to path, one per line, and returns how many.
func (l *idLog) write(path string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	for _, id := range l.ids {
		w.WriteString(id)
		w.WriteByte('\n')
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return 0, fmt.Errorf("write ids: %w", err)
	}
	return len(l.ids), nil
}
