// Package writegate serializes this process's writers on a database that
// allows a single writer at a time (SQLite): jdbcstore's stores acquire the
// gate of their pool, txctx's managers built by outbox.New and tenant.New
// yield to it before they begin a transaction.
package writegate

import (
	"context"
	"database/sql"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Gate gives the outbox store's own writes (status writes, claims)
// priority over business transactions on a database that allows a single
// writer at a time (SQLite). Without it a store write competes for the lock
// in SQLite's busy handler, which sleeps for milliseconds while busy
// business writers take the lock again and again: the DONE writes starve.
// With it, store writers take turns in Go (first come, first served) and a
// business transaction that is about to begin waits while a store write is
// pending.
//
// The gate is re-entrant through the context: Acquire returns a context
// that marks the gate held, and nested acquisitions with it do not wait.
type Gate struct {
	ch      chan struct{}
	pending atomic.Int32
}

// New returns an open gate.
func New() *Gate { return &Gate{ch: make(chan struct{}, 1)} }

type gateKey struct{ g *Gate }

// Acquire waits for the gate or ctx, for a store write. It returns a
// context marking the gate as held and the release function. A nil gate is
// always open.
func (g *Gate) Acquire(ctx context.Context) (context.Context, func(), error) {
	if g == nil || ctx.Value(gateKey{g}) != nil {
		return ctx, func() {}, nil
	}
	if err := ctx.Err(); err != nil {
		// Ended already: no write begins (SQLite's busy wait, once it
		// began, would not heed ctx), even with the gate free.
		return ctx, func() {}, err
	}
	g.pending.Add(1)
	select {
	case g.ch <- struct{}{}:
	case <-ctx.Done():
		g.pending.Add(-1)
		return ctx, func() {}, ctx.Err()
	}
	return context.WithValue(ctx, gateKey{g}, true), func() { <-g.ch; g.pending.Add(-1) }, nil
}

// MaxYield bounds how long Yield lets store writes go first. A store
// write normally holds the gate for a millisecond or two; one that holds
// it longer waits for another process's write lock in SQLite's busy
// handler, and waiting behind it (and behind each store write queued
// after it, each up to the busy timeout) would add their waits to the
// business transaction's own: its BEGIN then waits in the busy handler
// with them instead.
const MaxYield = 100 * time.Millisecond

// Yield lets pending store writes go first: when one is waiting or
// running, it waits until it is done, ctx ends or MaxYield passed.
// Business transactions call it before they begin. A nil gate never
// waits.
func (g *Gate) Yield(ctx context.Context) error {
	if g == nil || g.pending.Load() == 0 || ctx.Value(gateKey{g}) != nil {
		return nil
	}
	select { // the gate free: no timer
	case g.ch <- struct{}{}:
		<-g.ch
		return nil
	default:
	}
	t := time.NewTimer(MaxYield)
	defer t.Stop()
	select {
	case g.ch <- struct{}{}:
		<-g.ch
		return nil
	case <-t.C:
		return nil // go ahead: see MaxYield
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gates holds the gate of each single-writer pool, shared by every store
// on it. A pool is held weakly: its entry goes once it is collected (held
// strongly, every SQLite pool a store was made on, a tenant database that
// left the set say, stayed in memory for good).
var gates sync.Map // weak.Pointer[sql.DB] → *Gate

// For returns the gate of db, creating it on first use: the one gate every
// store on the pool shares.
func For(db *sql.DB) *Gate {
	key := weak.Make(db)
	if g, ok := gates.Load(key); ok {
		return g.(*Gate)
	}
	g, loaded := gates.LoadOrStore(key, New())
	if !loaded {
		runtime.AddCleanup(db, func(k weak.Pointer[sql.DB]) { gates.Delete(k) }, key)
	}
	return g.(*Gate)
}

// Of returns the gate of db if a store created one (see [For]), else nil:
// a nil gate never waits.
func Of(db *sql.DB) *Gate {
	g, ok := gates.Load(weak.Make(db))
	if !ok {
		return nil
	}
	return g.(*Gate)
}
