package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
)

// UnhandledPolicy tells the dispatcher what to do with an event no
// listener is registered for; see Config.Unhandled.
type UnhandledPolicy uint8

// The policies for events without a listener.
const (
	// UnhandledDone marks the event DONE, as if delivered: nobody wanted
	// it. The default.
	UnhandledDone UnhandledPolicy = iota
	// UnhandledLeave leaves the event pending for a listener registered
	// later (after Start, or on another node running newer code): it stays
	// NEW (or RETRY), no attempt is charged, its lease is released and it
	// is due again UnhandledDelay (lengthened at random by up to a quarter)
	// later, when a poller (of any node)
	// claims it and it is looked at again: this node's poller is not woken
	// for it, so a node that has the listener takes it at its next poll
	// (this one only at its own next Interval). With a store that does not
	// implement core.Postponer it is only released, and this node's poller
	// claims it again at its next poll.
	UnhandledLeave
	// UnhandledDead marks the event DEAD with the reason `no listener
	// registered for event type "X"`: it waits for an operator (outboxctl
	// dead list / replay).
	UnhandledDead
)

// String returns "done", "leave", "dead", or UnhandledPolicy(n) for another
// value.
func (p UnhandledPolicy) String() string {
	switch p {
	case UnhandledDone:
		return "done"
	case UnhandledLeave:
		return "leave"
	case UnhandledDead:
		return "dead"
	}
	return fmt.Sprintf("UnhandledPolicy(%d)", uint8(p))
}

// DefaultUnhandledDelay is the default of Config.UnhandledDelay.
const DefaultUnhandledDelay = time.Minute

// errNoListener tells process that no listener is registered for an event.
var errNoListener = errors.New("outbox: no listener registered for the event type")

// unhandled settles an event no listener is registered for, as
// Config.Unhandled says. It reports false when the calling worker must
// exit (see addDone).
func (d *Dispatcher) unhandled(it item) bool {
	o, typ := it.src, it.env.Type()
	if um, ok := o.metrics.(core.UnhandledMetrics); ok {
		um.Unhandled(typ)
	}
	d.warnNoListener(o, typ)
	if !d.settling(it, errNoListener, nil) {
		return true // stale: the event was taken again after InFlightTTL
	}
	it.observed(core.OutcomeUnhandled, errNoListener)
	switch d.cfg.Unhandled {
	case UnhandledLeave:
		d.leave(it)
	case UnhandledDead:
		msg := fmt.Sprintf("no listener registered for event type %q", typ)
		d.markDead(it, msg, nil, nil) // under the skip policy, frees the key as a failed event does
	default:
		return d.outcome(it, nil, nil) // DONE, as if delivered
	}
	return true
}

// leave puts off an event no listener is registered for: due again
// UnhandledDelay (to a quarter more) from now, its lease released, no
// attempt charged. This node's poller is not woken for it when it comes
// due: it is for a node that has the listener (a newer one, in a rolling
// deploy), which this one would beat to it every time (it re-took the
// event the moment it was due, and put it off again, for as long as it
// ran).
//
// The delay is lengthened at random by up to a quarter: with a fixed one,
// this node's poll, at a fixed Interval, fell at the same moment after the
// due time every round, and when it came before the other node's once it
// did every time, the event never reaching the node with the listener.
func (d *Dispatcher) leave(it item) {
	delay := d.cfg.UnhandledDelay
	if j := delay / 4; j > 0 {
		delay = cfgpath.Sum(delay, rand.N(j+1)) // saturates near the largest duration
	}
	d.postpone(it, delay,
		fmt.Sprintf("no listener registered for event type %q; left for later", it.env.Type()), false)
}

// postpone puts an event off for delay without charging an attempt: its
// status and attempts stay, available_at moves on, last_error records msg
// and the lease is released. With wake, this node's poller polls when it
// comes due, not at its next Interval. A store that cannot postpone (no
// core.Postponer) keeps the row as it is; the event is released for the
// poller.
func (d *Dispatcher) postpone(it item, delay time.Duration, msg string, wake bool) {
	if p, ok := it.src.store.(core.Postponer); ok {
		next := d.cfg.Now().Add(delay)
		st := d.writeStatus(it, "postpone", func(ctx context.Context) (bool, error) {
			return p.Postpone(ctx, d.cfg.Owner, it.env.ID(), next, msg)
		})
		if st == writeChanged {
			if fn := it.src.putOff.Load(); wake && fn != nil {
				(*fn)(time.Now().Add(delay))
			}
			d.releaseLater(it)
			return
		}
	}
	d.release(it)
}

// warnNoListener logs one WARN per event type without a listener, for the
// first ratelog.DefaultMaxKeys types; further types share a rate-limited
// WARN.
func (d *Dispatcher) warnNoListener(o *origin, eventType string) {
	var what string
	switch d.cfg.Unhandled {
	case UnhandledLeave:
		what = "events of this type are left pending, looked at again every UnhandledDelay (to a quarter more)"
	case UnhandledDead:
		what = "events of this type are marked DEAD"
	default:
		what = "events of this type are marked DONE"
	}
	d.noListener.Hit(o.log, slog.LevelWarn, eventType, "no listener registered for event type; "+what,
		slog.String("event_type", eventType))
}
