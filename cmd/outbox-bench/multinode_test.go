package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
)

// testParentEnv makes the test binary run the command itself with the
// arguments in the variable (JSON), for the test that kills the parent.
const testParentEnv = "OUTBOX_BENCH_TEST_PARENT"

// TestMain lets the test binary play the multinode scenario's nodes (the
// scenario re-executes os.Executable, which is the test binary here) and
// the parent that TestMultinodeParentKilled kills.
func TestMain(m *testing.M) {
	if code, ok := runNodeFromEnv(); ok {
		os.Exit(code)
	}
	if js, ok := os.LookupEnv(testParentEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(js), &args); err != nil {
			os.Exit(2)
		}
		os.Exit(run(context.Background(), args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestMultinodeSQLite runs floor, end_to_end and multinode small on
// SQLite (three processes on one file) and checks the lines and the
// summary: every event delivered exactly once across the nodes.
func TestMultinodeSQLite(t *testing.T) {
	testMultinode(t, "sqlite", "", floorInProcesses)
}

// TestMultinodeMySQL is TestMultinodeSQLite on the MariaDB of
// OUTBOX_TEST_MYSQL_DSN, with the floor in one process.
func TestMultinodeMySQL(t *testing.T) {
	testMultinode(t, "mysql", testdb.MySQLDSN(t), floorInProcess)
}

// testMultinode runs the multinode scenario small on db, its floor where
// floorIn says.
func testMultinode(t *testing.T, db, dsn, floorIn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	args := []string{"-db", db, "-json", "-scenarios", "floor,end_to_end,multinode", "-n", "300", "-rounds", "1",
		"-warmup", "20", "-poll-interval", "200ms", "-multinode-floor", floorIn}
	if dsn != "" {
		args = append(args, "-dsn", dsn)
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, args, &out, &errOut); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{scenarioFloor, scenarioEndToEnd, scenarioMultinode, scenarioMultinodeFloor}
	if len(lines) != len(want)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want)+1, out.String())
	}
	for i, name := range want {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatalf("line %d does not parse: %v\n%s", i+1, err, lines[i])
		}
		if m["scenario"] != name {
			t.Fatalf("line %d: scenario %v, want %s", i+1, m["scenario"], name)
		}
		switch name {
		case scenarioMultinodeFloor:
			workers, nodes := 4.0, any(3.0) // in 3 processes of 4 writers
			if floorIn == floorInProcess {
				workers, nodes = 12, nil // in this process, 3 x 4 writers
			}
			if m["workers"] != workers || m["nodes"] != nodes || m["n"] != 300.0 {
				t.Errorf("multinode_floor: want %v writers, %v nodes and n 300: %s", workers, nodes, lines[i])
			}
			if _, ok := m["events_per_s"].(float64); !ok {
				t.Errorf("multinode_floor: no events_per_s: %s", lines[i])
			}
		case scenarioMultinode:
			for f, v := range map[string]float64{"n": 300, "nodes": 3, "workers": 4, "lost": 0, "duplicates": 0} {
				if m[f] != v {
					t.Errorf("multinode: %s = %v, want %v: %s", f, m[f], v, lines[i])
				}
			}
			for _, f := range []string{"events_per_s", "ratio_to_floor", "cpu_us_per_event"} {
				if _, ok := m[f].(float64); !ok {
					t.Errorf("multinode: field %q missing: %s", f, lines[i])
				}
			}
		}
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("summary does not parse: %v", err)
	}
	for _, f := range []string{"multinode_ratio", "multi_ratio", "multinode_per_s", "multinode_floor_per_s", "end_to_end_ratio"} {
		if _, ok := s[f].(float64); !ok {
			t.Errorf("summary: field %q missing: %s", f, lines[len(lines)-1])
		}
	}
	if s["nodes"] != 3.0 || s["multinode_duplicates"] != 0.0 {
		t.Errorf("summary: nodes %v, duplicates %v: %s", s["nodes"], s["multinode_duplicates"], lines[len(lines)-1])
	}
}

// readyLine is the parent's -v log line for a node that is ready.
var readyLine = regexp.MustCompile(`msg="multinode: node ready" node=\d+ pid=(\d+)`)

// pidWatch is an io.Writer taking the parent's stderr: it collects the
// pids of the ready nodes and closes all once it has n of them.
type pidWatch struct {
	n    int
	all  chan struct{}
	mu   sync.Mutex
	buf  []byte
	pids []int
	tail bytes.Buffer // the last few KiB, for failure messages
}

func newPIDWatch(n int) *pidWatch { return &pidWatch{n: n, all: make(chan struct{})} }

func (w *pidWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tail.Len() > 8<<10 {
		w.tail.Reset()
	}
	w.tail.Write(p)
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if m := readyLine.FindSubmatch(w.buf[:i]); m != nil {
			pid, _ := strconv.Atoi(string(m[1]))
			w.pids = append(w.pids, pid)
			if len(w.pids) == w.n {
				close(w.all)
			}
		}
		w.buf = w.buf[i+1:]
	}
}

// ready waits (at most d) until every node is ready and returns their pids.
func (w *pidWatch) ready(t *testing.T, d time.Duration) []int {
	t.Helper()
	select {
	case <-w.all:
	case <-time.After(d):
		w.mu.Lock()
		defer w.mu.Unlock()
		t.Fatalf("the nodes did not all get ready within %v; stderr ends with:\n%s", d, w.tail.String())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.pids...)
}

// processGone reports whether pid no longer runs: no such process, or a
// zombie nobody reaped yet (an orphan whose new parent does not reap).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses.
	rest := b[bytes.LastIndexByte(b, ')')+1:]
	fields := strings.Fields(string(rest))
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

// waitGone waits (at most d) until every pid is gone.
func waitGone(t *testing.T, pids []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for !processGone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("node process %d still runs %v after its parent ended", pid, d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// requireProc skips where /proc cannot tell whether a process runs.
func requireProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to watch the node processes")
	}
}

// multinodeLongArgs run multinode with far more events than the tests
// wait for, so that the nodes are busy when the parent goes away.
var multinodeLongArgs = []string{"-db", "sqlite", "-v", "-scenarios", "floor,end_to_end,multinode", "-n", "100",
	"-multinode-n", "2000000", "-rounds", "1", "-warmup", "20", "-nodes", "3"}

// TestMultinodeInterrupt interrupts the parent while the nodes run: the
// run fails as interrupted and no node process is left.
func TestMultinodeInterrupt(t *testing.T) {
	requireProc(t)
	t.Setenv("TMPDIR", t.TempDir()) // the nodes' files too
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newPIDWatch(3)
	code := make(chan int, 1)
	var out bytes.Buffer
	go func() { code <- run(ctx, multinodeLongArgs, &out, w) }()
	pids := w.ready(t, 3*time.Minute)
	cancel()
	select {
	case c := <-code:
		if c != 1 {
			t.Errorf("exit status %d, want 1", c)
		}
	case <-time.After(time.Minute):
		t.Fatal("run did not return within a minute of the interrupt")
	}
	waitGone(t, pids, 10*time.Second) // run reaped them: at once
	if !strings.Contains(w.tail.String(), "interrupted") {
		t.Errorf("stderr does not say interrupted:\n%s", w.tail.String())
	}
}

// TestMultinodeParentKilled kills the parent process outright (SIGKILL,
// no cleanup of its own): the nodes see their stdin close and exit.
func TestMultinodeParentKilled(t *testing.T) {
	requireProc(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(multinodeLongArgs)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), testParentEnv+"="+string(args), "TMPDIR="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	w := newPIDWatch(3)
	go func() { _, _ = io.Copy(w, bufio.NewReader(stderr)) }()
	pids := w.ready(t, 3*time.Minute)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, pids, orphanGrace+10*time.Second)
}

// TestMultinodeFlags checks the multinode flags and their errors.
func TestMultinodeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-nodes", "1"}, "-nodes must be between 2 and 16"},
		{[]string{"-nodes", "17"}, "-nodes must be between 2 and 16"},
		{[]string{"-nodes", "3", "-scenarios", "floor,end_to_end"}, "-nodes: -scenarios selects no multinode scenario"},
		{[]string{"-scenarios", "multinode"}, "multinode is measured against end_to_end / floor"},
		{[]string{"-scenarios", "end_to_end,multinode"}, "so it needs floor and end_to_end"},
		{[]string{"-multinode-n", "-1", "-nodes", "3"}, "-multinode-n must be at least 1"},
		{[]string{"-multinode-floor", "cluster", "-nodes", "3"}, `-multinode-floor must be processes or process, got "cluster"`},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: stderr %q does not contain %q", tc.args, errOut.String(), tc.msg)
		}
	}
	o, err := parseFlags([]string{"-scenarios", "floor,end_to_end,multinode"}, io.Discard)
	if err != nil || strings.Join(o.scenarios, ",") != "floor,end_to_end,multinode,multinode_floor" || o.nodes != 3 {
		t.Errorf("multinode selected: scenarios %v, nodes %d, err %v; want multinode_floor added and 3 nodes", o.scenarios, o.nodes, err)
	}
	o, err = parseFlags([]string{"-nodes", "4"}, io.Discard)
	if err != nil || !o.has(scenarioMultinode) || !o.has(scenarioMultinodeFloor) || o.nodes != 4 {
		t.Errorf("-nodes 4: scenarios %v, nodes %d, err %v", o.scenarios, o.nodes, err)
	}
	o, err = parseFlags(nil, io.Discard)
	if err != nil || o.has(scenarioMultinode) || o.has(scenarioMultinodeFloor) {
		t.Errorf("defaults: scenarios %v, err %v; want no multinode without -nodes", o.scenarios, err)
	}
	var out, errOut bytes.Buffer
	run(context.Background(), []string{"-h"}, &out, &errOut)
	for _, s := range []string{"multinode_ratio", "multi_ratio", "multinode_floor", "-nodes"} {
		if !strings.Contains(errOut.String(), s) {
			t.Errorf("-h output lacks %q", s)
		}
	}
}

// TestMultinodeSummary checks multinode_ratio = (multinode /
// multinode_floor) / (end_to_end / floor) against its target and the
// duplicates target.
func TestMultinodeSummary(t *testing.T) {
	for _, tc := range []struct {
		multi, dups int
		ratio       float64
		missed      []string
	}{
		{multi: 864, ratio: 0.9}, // (864/1000) / (960/1000)
		{multi: 863, ratio: 0.899, missed: []string{"multinode_ratio >= 0.90"}},
		{multi: 960, dups: 2, ratio: 1, missed: []string{"multinode duplicates = 0"}},
	} {
		b := &bench{opts: &options{db: "mysql", nodes: 3}, floorRate: 1000, e2eRate: 960,
			multiFloorRate: 1000, multiRate: float64(tc.multi), multiDuplicates: tc.dups}
		s := b.summary()
		if s.MultinodeRatio == nil || *s.MultinodeRatio != tc.ratio {
			t.Errorf("multi %d: multinode_ratio %v, want %v", tc.multi, s.MultinodeRatio, tc.ratio)
		}
		if strings.Join(s.TargetsMissed, "|") != strings.Join(tc.missed, "|") || s.TargetsMet != (len(tc.missed) == 0) {
			t.Errorf("multi %d dups %d: missed %q (met %v), want %q", tc.multi, tc.dups, s.TargetsMissed, s.TargetsMet, tc.missed)
		}
	}
}
