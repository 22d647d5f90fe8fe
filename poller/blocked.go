package poller

import (
	"context"

	"github.com/outbox-go/outbox/core"
)

// blockedKeyCounter is implemented by a store that delivers events in
// order per key (jdbcstore.Store): it counts the keys held by a DEAD
// event under the block policy.
type blockedKeyCounter interface {
	CountBlockedKeys(ctx context.Context) (int, error)
}

// reportBlockedKeys counts the blocked ordering keys of every store that
// can count them and whose Metrics takes the count (core.OrderMetrics,
// not a plain core.NopMetrics), one statement per store. A failing count
// is logged once per incident and store, and its recovery.
func (p *Poller) reportBlockedKeys(ctx context.Context) {
	for _, t := range p.targets.Members() {
		om, ok := t.metrics.(core.OrderMetrics)
		if _, nop := t.metrics.(core.NopMetrics); !ok || nop {
			continue
		}
		c, ok := t.store.(blockedKeyCounter)
		if !ok {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
		n, err := c.CountBlockedKeys(qctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			continue // the poller is closing
		}
		t.counting.Report(t.log, err, "counting blocked ordering keys failed; will try again (logged once until it recovers)",
			"counting blocked ordering keys failed again", "counting blocked ordering keys recovered")
		if err == nil {
			om.BlockedKeys(n)
		}
	}
}
