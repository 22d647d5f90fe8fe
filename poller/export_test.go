package poller

import (
	"context"

	"github.com/outbox-go/outbox/core"

	"github.com/outbox-go/outbox/internal/handoff"
)

// NewWithQueue is New with a queue of the test's own instead of a
// dispatcher (the hand-off between the parts is internal).
func NewWithQueue(store Store, q handoff.Cold, cfg Config) (*Poller, error) {
	return newWithQueue(store, q, cfg)
}

// AddQueue is Add with a queue of the test's own.
func (p *Poller) AddQueue(id string, store Store, q handoff.Cold) error {
	if q == nil {
		return p.addQueue(id, store, nil)
	}
	return p.addQueue(id, store, q)
}

// WakeStore wakes the poll of store id, through the hook package tenant
// uses.
func (p *Poller) WakeStore(id string) { handoff.WakeStore(p, id) }

// ReportBlockedKeys runs one count of the blocked ordering keys.
func (p *Poller) ReportBlockedKeys(ctx context.Context) { p.reportBlockedKeys(ctx) }

// ClaimAfter hands finished ordered events of store id to the poller,
// through the hook the dispatcher calls.
func (p *Poller) ClaimAfter(id string, after []core.OrderPos) { handoff.Successors(p, id)(after) }
