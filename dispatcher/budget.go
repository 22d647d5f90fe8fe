package dispatcher

import (
	"log/slog"

	"github.com/outbox-go/outbox/core"
)

// The payload and header bytes the dispatcher holds in memory are counted from the
// moment an event is taken (EnqueueHot, EnqueueCold) until it leaves
// memory (its outcome written, released, discarded or abandoned): queued,
// waiting on a timer, running, or waiting for its DONE write. The count
// is bounded by Config.MaxHeldBytes; beyond it an event is left to the
// database exactly as when a queue is full.

// heldSize is what an event counts against MaxHeldBytes: its payload
// and its headers' keys and values.
func heldSize(env core.Envelope) int64 {
	n := env.PayloadLen()
	for k, v := range env.RawHeaders() {
		n += len(k) + len(v)
	}
	return int64(n)
}

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
// taken when nothing else is held but events waiting on a timer, however
// large: otherwise an event larger than the budget left would not be
// delivered until they fired, or ever.
func (d *Dispatcher) reserveBytes(n int64) bool {
	limit := d.cfg.MaxHeldBytes
	for {
		cur := d.heldBytes.Load()
		if limit >= 0 && cur > d.timerBytes.Load() && cur+n > limit {
			return false
		}
		if d.heldBytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// notePayload feeds the running estimate of payload sizes (a moving
// average over about the last 8 events offered) that coldBudgetRoom uses.
// Concurrent updates may lose one another: it is an estimate.
func (d *Dispatcher) notePayload(n int64) {
	est := d.payloadEst.Load()
	if est == 0 {
		d.payloadEst.Store(max(n, 1))
		return
	}
	d.payloadEst.Store(max(est+(n-est)/8, 1))
}

// maxEventBytes is the most one event can count against MaxHeldBytes
// (heldSize): the largest payload and headers an envelope may carry.
const maxEventBytes = core.MaxPayloadBytes + core.MaxHeadersBytes

// coldBudgetRoom returns how many more events of the usual payload size
// fit in MaxHeldBytes now (0 when not even one does, though some budget
// is left), or -1 without a limit. Before any event was seen the usual
// size is unknown: it counts events of the largest size an event may
// have. While nothing is held but events waiting on a timer it is at
// least 1, since any one event is taken then, however large. The poller
// claims no more rows than that, so it neither reads payloads it could
// not hold nor leases rows it could not enqueue, which would stay leased
// to this node, out of other nodes' reach, until a later claim of its own
// took them.
func (d *Dispatcher) coldBudgetRoom() int {
	if d.cfg.MaxHeldBytes < 0 {
		return -1
	}
	held := d.heldBytes.Load()
	free := d.cfg.MaxHeldBytes - held
	if free <= 0 {
		if held <= d.timerBytes.Load() {
			return 1 // one event beside the timers', as reserveBytes takes it
		}
		return 0
	}
	est := d.payloadEst.Load()
	if est <= 0 {
		est = maxEventBytes
	}
	n := min(free/est, int64(cap(d.cold)))
	if n == 0 && held <= d.timerBytes.Load() {
		n = 1 // an event larger than the budget left, taken alone (besides the timers')
	}
	return int(n)
}

// warnOverBudget logs (rate-limited) an event left to the poller because
// the payload budget is used up.
func (d *Dispatcher) warnOverBudget(o *origin, env core.Envelope) {
	o.logs.budget.Hit(o.log, slog.LevelWarn, "memory budget for held payloads and headers used up (MaxHeldBytes): event left in the database for the poller",
		slog.String("event_id", env.ID()), slog.Int64("bytes", heldSize(env)),
		slog.Int64("held_bytes", d.heldBytes.Load()), slog.Int64("max_held_bytes", d.cfg.MaxHeldBytes))
}
