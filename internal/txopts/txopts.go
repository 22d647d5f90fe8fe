// Package txopts holds the options of txctx's Manager, so that the wiring
// packages (outbox, tenant) can set the hooks users do not: the SQLite
// write gate and the dispatcher's yield. txctx.Option is a func(*Options):
// convert the result of [Hooks] with txctx.Option(…).
package txopts

import (
	"database/sql"
	"log/slog"

	"github.com/outbox-go/outbox/internal/writegate"
)

// Options are a txctx.Manager's (or an adopted transaction's) settings.
type Options struct {
	// Logger logs panicking hooks and hooks registered too late.
	Logger *slog.Logger
	// TxOptions are the options of the transactions Manager.Do begins.
	TxOptions *sql.TxOptions
	// Gate, when set, makes Manager.Do let the outbox store's pending
	// writes go first before it begins a transaction, so on SQLite the
	// store's status writes are not starved by busy business writers in
	// SQLite's sleeping busy handler. A nil gate does nothing.
	Gate *writegate.Gate
	// Yield, when set, makes Manager.Do give up its processor
	// (runtime.Gosched) before it begins a transaction whenever it reports
	// true. The wiring passes the dispatcher's HotWaiting: a delivery
	// worker woken by the previous transaction's after-commit hook is
	// runnable on the committing goroutine's processor, and when that
	// goroutine goes straight into its next transaction while the other
	// processors are busy, the worker would wait until the goroutine
	// blocks (milliseconds). Yielding lets it run first, so the event
	// reaches its listener in microseconds. Do never yields for a
	// transaction it joins. It must be cheap and safe for concurrent use;
	// it is called once per transaction Do begins.
	Yield func() bool
}

// Hooks sets the write gate and the yield function (see [Options]); either
// may be nil.
func Hooks(gate *writegate.Gate, yield func() bool) func(*Options) {
	return func(o *Options) { o.Gate, o.Yield = gate, yield }
}
