package poller

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/handoff"
)

// lockedRetry is how long the poller first waits before it asks again
// for the events a claim by position found locked by another transaction
// (core.NextResult.Locked): the transaction publishing the event after
// each, which usually ends within moments. While the claims of a store
// keep finding locked events, the wait doubles up to BacklogInterval.
const lockedRetry = 5 * time.Millisecond

// dueSlack is how long after the time an event not due yet becomes due
// (core.NextResult.NextDue) the poller asks for it again.
const dueSlack = time.Millisecond

// dueWait is how long the poller waits before it asks again for a delayed
// event due at due: dueSlack past it, at most the largest Duration. (A
// NotBefore over 292 years ahead saturated Sub, adding dueSlack wrapped
// negative, and the claim was asked again at once, for ever.)
func dueWait(now, due time.Time) time.Duration {
	return cfgpath.Sum(due.Sub(now), dueSlack)
}

// maxAfter bounds the finished ordered events a store's successor claims
// wait with, in multiples of BatchSize: beyond it the poller forgets them
// and makes one full claim of the store instead, which finds their
// successors too.
const maxAfter = 4

func init() {
	handoff.Successors = func(p any, id string) func([]core.OrderPos) {
		pp := p.(*Poller)
		return func(after []core.OrderPos) { pp.claimAfter(id, after) }
	}
}

// claimAfter has the loop claim the events after the finished ordered
// events at positions after of store id, at once and by position
// (core.SuccessorClaimer): such an event waits for a poller, and a claim
// of its position costs one lookup however many rows wait, where a full
// claim reads every pending row to find the few whose key is free. A nil
// after, or a store that cannot claim by position, wakes a full claim of
// the store instead (wakeStore). It never blocks.
func (p *Poller) claimAfter(id string, after []core.OrderPos) {
	t, ok := p.targets.Get(id)
	if !ok {
		return
	}
	if _, byPos := t.store.(core.SuccessorClaimer); !byPos || len(after) == 0 {
		p.wakeStore(id)
		return
	}
	p.wakeMu.Lock()
	full := len(t.after)+len(after) > maxAfter*p.cfg.BatchSize
	switch {
	case full:
		t.after = nil
	case len(t.after) == 0:
		p.afterStores = append(p.afterStores, id)
		fallthrough
	default:
		t.after = append(t.after, after...)
	}
	p.wakeMu.Unlock()
	if full {
		p.wakeStore(id)
		return
	}
	p.run.Wake()
}

// claimSuccessors claims the events after the finished ordered events
// handed to claimAfter, store by store, and hands them to the store's
// cold queue. A store whose queue has no room keeps its positions until
// the queue's room notice; one whose claim fails forgets them and is
// woken for a full claim, whose poll reports the incident.
func (p *Poller) claimSuccessors(ctx context.Context) {
	p.cycleMu.Lock()
	defer p.cycleMu.Unlock()
	for _, id := range p.storesWithAfter() {
		t, ok := p.targets.Get(id)
		if !ok {
			continue
		}
		room := t.queue.ColdRoom()
		after := p.takeAfter(id, t, room)
		if len(after) == 0 {
			if room <= 0 {
				p.armRoom(t)
			}
			continue
		}
		if err := p.claimNext(ctx, t, after); err != nil && ctx.Err() == nil {
			t.log.Debug("claim of the next events of finished ordered events failed; polling instead", slog.String("error", err.Error()))
			p.wakeStore(id)
		}
	}
}

// storesWithAfter returns the stores with positions waiting, in the
// order they got their first.
func (p *Poller) storesWithAfter() []string {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	return slices.Clone(p.afterStores)
}

// takeAfter takes up to n of the positions of t, store id, the oldest
// first; a store left with none leaves the list of storesWithAfter.
func (p *Poller) takeAfter(id string, t *target, n int) []core.OrderPos {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	n = min(max(n, 0), len(t.after))
	after := t.after[:n:n]
	if t.after = t.after[n:]; len(t.after) == 0 {
		t.after = nil
		p.afterStores = slices.DeleteFunc(p.afterStores, func(s string) bool { return s == id })
	}
	return after
}

// claimNext claims the events after positions after of t for this node's
// lease and enqueues them; the positions found locked are handed back
// for a claim shortly after. The caller holds cycleMu.
func (p *Poller) claimNext(ctx context.Context, t *target, after []core.OrderPos) error {
	sc := t.store.(core.SuccessorClaimer)
	ctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
	defer cancel()
	now := p.cfg.Now()
	lease := t.queue.ClaimLease(now)
	mark := t.queue.ClaimMark()
	start := time.Now()
	next, err := sc.ClaimNext(ctx, core.NextRequest{Owner: lease.Owner, Now: now, LeaseUntil: lease.Until, After: after})
	if obs := p.cfg.Observer; obs != nil {
		obs.Claimed(t.id, len(next.Claimed), time.Since(start), err)
	}
	if len(next.Locked) > 0 {
		t.lockedWait = min(max(2*t.lockedWait, lockedRetry), p.cfg.BacklogInterval)
		id, locked := t.id, next.Locked
		p.afterFunc(t.lockedWait, func() { p.claimAfter(id, locked) })
	} else if err == nil {
		t.lockedWait = 0
	}
	if len(next.Later) > 0 && !next.NextDue.IsZero() {
		// Delayed events after finished ones: asked for again when the
		// first is due (dueSlack later, past the stored time's rounding),
		// not left to the next full claim.
		id, later := t.id, next.Later
		p.afterFunc(dueWait(now, next.NextDue), func() { p.claimAfter(id, later) })
	}
	var res Result
	res.Store, res.Read = t.id, len(next.Claimed)
	p.enqueue(ctx, t, lease, mark, next.Claimed, &res)
	if err == nil {
		p.report(t, res, nil)
	}
	return err
}
