package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// The multinode scenarios (run by default only with -nodes).
const (
	scenarioMultinodeFloor = "multinode_floor"
	scenarioMultinode      = "multinode"
	defaultNodes           = 3
	maxNodes               = 16
)

// multinodeScenarios are the scenarios of several processes on one
// database and their floor.
var multinodeScenarios = []string{scenarioMultinode, scenarioMultinodeFloor}

// Where multinode_floor runs (-multinode-floor).
const (
	floorInProcesses = "processes" // -nodes processes of W writers, like multinode
	floorInProcess   = "process"   // this process, -nodes × W writers
)

// runMultinodeFloor measures the floor of the multinode scenario: the
// floor's transaction on nodes × W writers, M transactions in all. By
// default it runs in -nodes processes of W writers, laid out like the
// multinode scenario (the same start barrier, the rate M / (last end −
// first start)), so that the ratio compares the outbox with the floor
// and not one process with several; -multinode-floor process runs it in
// this one process instead.
func (b *bench) runMultinodeFloor(ctx context.Context) (result, error) {
	k, n := b.opts.nodes, b.opts.multiN
	if b.opts.multiFloor == floorInProcess {
		r, err := b.floor(ctx, scenarioMultinodeFloor, k*b.opts.workers, n)
		r.Notes = append(r.Notes, "in_process")
		return r, err
	}
	f, err := openFresh(ctx, b.opts)
	if err != nil {
		return result{}, err
	}
	defer b.closeDB(f)
	if _, err := b.floorTx(ctx, f); err != nil { // the table, before the nodes
		return result{}, err
	}
	dir, err := os.MkdirTemp("", "outbox-bench-multinode-*")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	g, err := b.startNodes(ctx, f, dir, true)
	if err != nil {
		return result{}, err
	}
	defer g.kill()
	if err := g.awaitAll(ctx, evReady); err != nil {
		return result{}, err
	}
	b.resetRSS()
	for _, step := range []struct{ cmd, ev string }{{cmdGo, evPublished}, {cmdStop, evClosed}} {
		if err := g.sendAll(step.cmd); err != nil {
			return result{}, err
		}
		if err := g.awaitAll(ctx, step.ev); err != nil {
			return result{}, err
		}
	}
	if err := g.wait(); err != nil {
		return result{}, err
	}
	first, last := g.publishSpan()
	r := b.newResult(scenarioMultinodeFloor, n)
	r.rate = rate(n, last.Sub(first))
	r.Nodes = ptr(k)
	var cpu float64
	for _, nd := range g.nodes {
		cpu += nd.closed.CPUus
	}
	r.CPUusPerEvent = round(cpu/float64(n), 1)
	r.Notes = append(r.Notes, fmt.Sprintf("writers=%dx%d", k, b.opts.workers))
	return r, nil
}

// runMultinode runs -nodes processes of this binary on one fresh database,
// each a full outbox (dispatcher and poller, owner token of its own)
// publishing its share of the -multinode-n events (M) on W writers and delivering them.
// The nodes start publishing together (a "go" line on their stdin, once
// every node's warm-up is DONE); the rate is M / (last DONE − first
// start), the end seen by polling the table as end_to_end does. Then it
// checks exactly-once delivery across the nodes: every committed event's
// id was seen by exactly one listener call in all nodes together, and
// every row is DONE. A missing or extra delivery, or a row not DONE, fails
// the scenario; duplicates are reported (target 0).
func (b *bench) runMultinode(ctx context.Context) (result, error) {
	f, err := openFresh(ctx, b.opts)
	if err != nil {
		return result{}, err
	}
	defer b.closeDB(f)
	// The nodes find the schema in place (their idempotent apply is a
	// no-op) instead of racing to create it.
	store, err := jdbcstore.New(f.db, jdbcstore.Config{Logger: b.log})
	if err != nil {
		return result{}, err
	}
	if err := store.ApplySchema(ctx); err != nil {
		return result{}, fmt.Errorf("apply schema: %w", err)
	}
	dir, err := os.MkdirTemp("", "outbox-bench-multinode-*")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)

	k, n := b.opts.nodes, b.opts.multiN
	g, err := b.startNodes(ctx, f, dir, false)
	if err != nil {
		return result{}, err
	}
	defer g.kill() // a no-op once they exited
	if err := g.awaitAll(ctx, evReady); err != nil {
		return result{}, err
	}
	warm := k * b.opts.warmup
	if _, err := g.waitRows(ctx, f, warm); err != nil {
		return result{}, fmt.Errorf("warm-up: %w", err)
	}
	b.resetRSS()
	if err := g.sendAll(cmdGo); err != nil {
		return result{}, err
	}
	if err := g.awaitAll(ctx, evPublished); err != nil {
		return result{}, err
	}
	doneAt, err := g.waitRows(ctx, f, warm+n)
	if err != nil {
		return result{}, err
	}
	if err := g.sendAll(cmdStop); err != nil {
		return result{}, err
	}
	if err := g.awaitAll(ctx, evClosed); err != nil {
		return result{}, err
	}
	if err := g.wait(); err != nil {
		return result{}, err
	}
	check, err := checkDelivery(ctx, f, g)
	if err != nil {
		return result{}, err
	}
	if err := check.err(n); err != nil {
		return result{}, err
	}
	b.multiDuplicates += check.duplicates

	first, lastPublished := g.publishSpan()
	r := b.newResult(scenarioMultinode, n)
	r.rate = rate(n, doneAt.Sub(first))
	r.Nodes = ptr(k)
	r.Duplicates = ptr(check.duplicates)
	r.Lost = ptr(0)
	var cpu float64
	var hot, cold, leaseLost int64
	for _, nd := range g.nodes {
		cpu += nd.closed.CPUus
		hot += nd.closed.HotDropped
		cold += nd.closed.ColdEnqueued
		leaseLost += nd.closed.LeaseLost
	}
	r.CPUusPerEvent = round(cpu/float64(n), 1)
	r.HotDropped = ptr(hot)
	r.ColdEnqueued = ptr(cold)
	r.Notes = append(r.Notes, fmt.Sprintf("writers=%dx%d", k, b.opts.workers),
		fmt.Sprintf("publish_s=%.3f", lastPublished.Sub(first).Seconds()))
	if leaseLost > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("lease_lost=%d", leaseLost))
	}
	return r, nil
}

// waitRows polls the table every 2 ms until at least want rows are DONE
// and returns when it saw them. A DEAD row, a node's message or exit, the
// -timeout or an interrupt ends the wait with an error.
func (g *nodeGroup) waitRows(ctx context.Context, f *freshDB, want int) (time.Time, error) {
	q := "SELECT status, COUNT(*) FROM " + jdbcstore.DefaultTable + " GROUP BY status"
	deadline := time.Now().Add(g.b.opts.timeout)
	for {
		counts := map[core.Status]int{}
		rows, err := f.db.QueryContext(ctx, q)
		if err != nil {
			return time.Time{}, fmt.Errorf("count rows: %w", err)
		}
		for rows.Next() {
			var s core.Status
			var c int
			if err := rows.Scan(&s, &c); err != nil {
				rows.Close()
				return time.Time{}, fmt.Errorf("count rows: %w", err)
			}
			counts[s] = c
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return time.Time{}, fmt.Errorf("count rows: %w", err)
		}
		now := time.Now()
		switch {
		case counts[core.StatusDone] >= want:
			return now, nil
		case counts[core.StatusDead] > 0:
			return time.Time{}, fmt.Errorf("%d events are DEAD", counts[core.StatusDead])
		case now.After(deadline):
			return time.Time{}, fmt.Errorf("timed out after %v: %d of %d events DONE (%d NEW, %d RETRY)",
				g.b.opts.timeout, counts[core.StatusDone], want, counts[core.StatusNew], counts[core.StatusRetry])
		}
		if err := g.quiet(); err != nil {
			return time.Time{}, err
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}

// delivery is what checkDelivery found.
type delivery struct {
	committed  int // rows of eventType
	notDone    int // of them, not DONE
	lost       int // committed, never seen by a listener
	unknown    int // seen, but no such row
	duplicates int // listener calls beyond the first, per event
}

// err reports a broken delivery of n events.
func (d delivery) err(n int) error {
	var errs []error
	if d.committed != n {
		errs = append(errs, fmt.Errorf("%d events committed, want %d", d.committed, n))
	}
	if d.lost > 0 {
		errs = append(errs, fmt.Errorf("%d events lost: committed but no node's listener saw them", d.lost))
	}
	if d.notDone > 0 {
		errs = append(errs, fmt.Errorf("%d events not DONE at the end", d.notDone))
	}
	if d.unknown > 0 {
		errs = append(errs, fmt.Errorf("%d events seen by a listener that were never committed", d.unknown))
	}
	return errors.Join(errs...)
}

// checkDelivery reads every node's id file and every row of eventType and
// compares them.
func checkDelivery(ctx context.Context, f *freshDB, g *nodeGroup) (delivery, error) {
	seen := map[string]int{}
	for _, nd := range g.nodes {
		file, err := os.Open(nd.spec.IDFile)
		if err != nil {
			return delivery{}, fmt.Errorf("node %d: %w", nd.spec.Index, err)
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			seen[sc.Text()]++
		}
		err = errors.Join(sc.Err(), file.Close())
		if err != nil {
			return delivery{}, fmt.Errorf("node %d: read ids: %w", nd.spec.Index, err)
		}
	}
	var d delivery
	q := f.db.Rebind("SELECT event_id, status FROM " + jdbcstore.DefaultTable + " WHERE event_type = ?")
	rows, err := f.db.QueryContext(ctx, q, eventType)
	if err != nil {
		return d, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var s core.Status
		if err := rows.Scan(&id, &s); err != nil {
			return d, fmt.Errorf("read events: %w", err)
		}
		d.committed++
		if s != core.StatusDone {
			d.notDone++
		}
		switch c := seen[id]; {
		case c == 0:
			d.lost++
		case c > 1:
			d.duplicates += c - 1
		}
		delete(seen, id)
	}
	if err := rows.Err(); err != nil {
		return d, fmt.Errorf("read events: %w", err)
	}
	d.unknown = len(seen)
	return d, nil
}
