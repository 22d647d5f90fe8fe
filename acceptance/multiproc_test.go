package acceptance

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Environment of a child node process (see TestMain).
const (
	envNodeRole   = "OUTBOX_NODE_ROLE"
	envNodeDriver = "OUTBOX_NODE_DRIVER"
	envNodeDSN    = "OUTBOX_NODE_DSN"
	envNodeName   = "OUTBOX_NODE_NAME"
	envNodeCount  = "OUTBOX_NODE_COUNT"
)

// Three OS processes (this test binary, re-executed) share one database;
// each publishes its share while all run dispatcher and poller, and every
// listener invocation is recorded. Without a kill no event is delivered
// twice; with one node SIGKILLed mid-way, the others take over its events
// once its leases expire, and only events it held in flight are delivered
// twice. In both runs every event ends DONE and none is lost.
func TestMultiProcessMySQL(t *testing.T) { testMultiProcess(t, mysqlNodes) }

// See TestMultiProcessMySQL; on PostgreSQL the nodes also wake each
// other's pollers through LISTEN/NOTIFY.
func TestMultiProcessPostgres(t *testing.T) { testMultiProcess(t, postgresNodes) }

// nodeDatabase gives the node processes of one run a fresh, empty
// database: a pool for the test and what a child opens it with.
type nodeDatabase func(t *testing.T) (db *sqlx.DB, driver, dsn string)

func mysqlNodes(t *testing.T) (*sqlx.DB, string, string) {
	cfg := testdb.MySQLConfig(t)
	return testdb.OpenMySQL(t, cfg), "mysql", cfg.FormatDSN()
}

func postgresNodes(t *testing.T) (*sqlx.DB, string, string) {
	dsn := testdb.PostgresSchemaDSN(t)
	return testdb.OpenPostgres(t, dsn), "pgx", dsn
}

func testMultiProcess(t *testing.T, open nodeDatabase) {
	t.Run("NoKill", func(t *testing.T) { runMultiProcess(t, open, false) })
	t.Run("KillOneNode", func(t *testing.T) { runMultiProcess(t, open, true) })
}

func runMultiProcess(t *testing.T, open nodeDatabase, kill bool) {
	const nodes, perNode = 3, 300
	db, driver, dsn := open(t)
	ctx := context.Background()
	store, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, invocationsDDL); err != nil {
		t.Fatal(err)
	}
	children := make([]*child, nodes)
	for i := range children {
		children[i] = startChild(t, driver, dsn, fmt.Sprintf("node-%d", i), perNode)
	}
	victim := -1
	if kill {
		victim = 1
		name := children[victim].name
		// Kill it once it has committed part of its share: some of its
		// events are then queued or running in it.
		waitLong(t, name+" to publish half its share", func() bool {
			select {
			case <-children[victim].exited:
				t.Fatalf("%s exited early: %v", name, children[victim].exitErr)
			default:
			}
			return countRows(t, db, `SELECT COUNT(*) FROM outbox_event WHERE aggregate_id = ?`, name) >= perNode/2
		})
		if err := children[victim].cmd.Process.Kill(); err != nil {
			t.Fatalf("SIGKILL %s: %v", name, err)
		}
		<-children[victim].exited
		t.Logf("killed %s after it published %d events", name,
			countRows(t, db, `SELECT COUNT(*) FROM outbox_event WHERE aggregate_id = ?`, name))
	}
	for i, c := range children {
		if i != victim {
			c.waitPublished(t)
		}
	}
	waitLong(t, "every event DONE", func() bool {
		return countRows(t, db, `SELECT COUNT(*) FROM outbox_event WHERE status <> 1`) == 0
	})
	for i, c := range children {
		if i != victim {
			c.stop(t)
		}
	}
	published := map[string]bool{}
	var all []string
	if err := db.SelectContext(ctx, &all, `SELECT event_id FROM outbox_event`); err != nil {
		t.Fatal(err)
	}
	for _, id := range all {
		published[id] = true
	}
	if !kill && len(published) != nodes*perNode {
		t.Fatalf("%d events stored, want %d", len(published), nodes*perNode)
	}
	l, err := readLedger(ctx, db, "outbox_event")
	if err != nil {
		t.Fatal(err)
	}
	victimName := ""
	if kill {
		victimName = children[victim].name
	}
	// A node that logged a warning (a listener past its timeout, a status
	// write that failed or was fenced off: a machine stalled long enough
	// for the nodes' one-second timeouts) may deliver its events again,
	// as at least once allows; a node with a clean log never does.
	warned := map[string]int{}
	for i, c := range children {
		if i != victim && c.warnings > 0 {
			warned[c.name] = c.warnings
		}
	}
	explained := 0
	dups := l.check(t, published, func(by []string) bool {
		for _, n := range by {
			if n == victimName {
				return true // the killed node held it in flight
			}
		}
		for _, n := range by {
			if warned[n] > 0 {
				explained++
				return true
			}
		}
		return false
	})
	if !kill && dups != explained {
		t.Errorf("%d duplicate deliveries with no node killed (%d by nodes that logged warnings: %v)", dups, explained, warned)
	}
	t.Logf("%d events, %d delivered twice (killed node: %q; %d by nodes that logged warnings: %v)",
		len(published), dups, victimName, explained, warned)
}

// child is one node process.
type child struct {
	name      string
	cmd       *exec.Cmd
	published chan int
	exited    chan struct{} // closed when the process has exited
	exitErr   error         // valid once exited is closed
	warnings  int           // WARN and ERROR lines it logged (reported at a graceful exit); valid once exited is closed
}

func startChild(t *testing.T, driver, dsn, name string, count int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envNodeRole+"=child", envNodeDriver+"="+driver, envNodeDSN+"="+dsn, envNodeName+"="+name,
		envNodeCount+"="+strconv.Itoa(count))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	c := &child{name: name, cmd: cmd, published: make(chan int, 1), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "PUBLISHED "); ok {
				v, _ := strconv.Atoi(n)
				c.published <- v
			}
			if n, ok := strings.CutPrefix(sc.Text(), "WARNINGS "); ok {
				c.warnings, _ = strconv.Atoi(n)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		c.exitErr = cmd.Wait() // after the pipe is drained, as os/exec requires
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

func (c *child) waitPublished(t *testing.T) {
	t.Helper()
	select {
	case n := <-c.published:
		if n <= 0 {
			t.Fatalf("%s published %d events", c.name, n)
		}
	case <-c.exited:
		t.Fatalf("%s exited before publishing its share: %v", c.name, c.exitErr)
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not finish publishing", c.name)
	}
}

// stop asks the node to shut down gracefully and waits for its exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", c.name, err)
	}
	select {
	case <-c.exited:
		if c.exitErr != nil {
			t.Errorf("%s exited with %v", c.name, c.exitErr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit after SIGTERM", c.name)
	}
}

// TestMain runs this test binary as a node process when a multi-process
// test started it so, and as the test suite otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(envNodeRole) == "child" {
		if err := runChildNode(); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChildNode is one node of a multi-process test: publish its share
// while running dispatcher and poller, then keep delivering until SIGTERM.
func runChildNode() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	name := os.Getenv(envNodeName)
	count, err := strconv.Atoi(os.Getenv(envNodeCount))
	if err != nil {
		return err
	}
	db, err := sqlx.Open(os.Getenv(envNodeDriver), os.Getenv(envNodeDSN))
	if err != nil {
		return err
	}
	defer db.Close()
	// As many idle connections as run at once (4 writers, 4 workers, the
	// DONE writes and the poller): with database/sql's 2, PostgreSQL
	// connects took over a second on a loaded machine and status writes
	// and listeners ran past their one-second timeouts.
	db.SetMaxIdleConns(16)
	// Its warnings go to the test's output, and their number to the
	// parent at a graceful exit.
	warnings := &countingHandler{Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), n: new(atomic.Int64)}
	ob, err := startNode(context.Background(), db, name, slog.New(warnings), nil)
	if err != nil {
		return err
	}
	ids, err := publishShare(context.Background(), ob, name, count)
	if err != nil {
		return err
	}
	fmt.Printf("PUBLISHED %d\n", len(ids))
	<-ctx.Done() // the parent sends SIGTERM once every event is DONE
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ob.Close(cctx)
	fmt.Printf("WARNINGS %d\n", warnings.n.Load())
	return err
}

// countingHandler counts the records its Handler (at level WARN) takes.
type countingHandler struct {
	slog.Handler
	n *atomic.Int64
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.n.Add(1)
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(as), n: h.n}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), n: h.n}
}

func countRows(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Get(&n, db.Rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// waitLong re-checks cond for up to two minutes (three node processes under
// the race detector, and a lease to expire).
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.WaitFor(t, 2*time.Minute, what, cond)
}
