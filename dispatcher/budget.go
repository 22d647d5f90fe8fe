package dispatcher

import (
	"log/slog"

	"github.com/outbox-go/outbox/core"
)

// The payload bytes the dispatcher holds in memory are counted from the
// moment an event is taken (EnqueueHot, EnqueueCold) until it leaves
// memory (its outcome written, released, discarded or abandoned): queued,
// waiting on a timer, running, or waiting for its DONE write. The count
// is bounded by Config.MaxHeldBytes; beyond it an event is left to the
// database exactly as when a queue is full.

// acquireResult tells why acquire did or did not take an event.
type acquireResult int

const (
	acquired   acquireResult = iota
	refused                  // the store was removed
	held                     // held already, or finished a moment ago
	overBudget               // MaxHeldBytes would be exceeded
)

// reserveBytes adds n to the payload bytes held and reports true, or
// reports false when that would exceed MaxHeldBytes. An event is always
// taken when nothing else is held, however large: otherwise an event
// larger than the whole budget would never be delivered.
func (d *Dispatcher) reserveBytes(n int64) bool {
	limit := d.cfg.MaxHeldBytes
	for {
		cur := d.heldBytes.Load()
		if limit >= 0 && cur > 0 && cur+n > limit {
			return false
		}
		if d.heldBytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// budgetExhausted reports whether no more payload bytes may be held now.
func (d *Dispatcher) budgetExhausted() bool {
	return d.cfg.MaxHeldBytes >= 0 && d.heldBytes.Load() >= d.cfg.MaxHeldBytes
}

// HeldBytes returns the payload bytes of the events the dispatcher holds in
// memory now (queued, waiting on a timer, running or waiting for their
// DONE write), which Config.MaxHeldBytes bounds.
func (d *Dispatcher) HeldBytes() int64 { return d.heldBytes.Load() }

// warnOverBudget logs (rate-limited) an event left to the poller because
// the payload budget is used up.
func (d *Dispatcher) warnOverBudget(o *origin, env core.Envelope) {
	d.budgetLog.Hit(o.log, slog.LevelWarn, "memory budget for held payloads used up (MaxHeldBytes): event left in the database for the poller",
		slog.String("event_id", env.ID()), slog.Int("payload_bytes", env.PayloadLen()),
		slog.Int64("held_bytes", d.heldBytes.Load()), slog.Int64("max_held_bytes", d.cfg.MaxHeldBytes))
}
