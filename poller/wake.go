package poller

import (
	"context"
	"time"
)

// Wake makes a started poller poll at once instead of waiting for the
// rest of its interval, for example because another node announced a
// committed event (package outbox does this on PostgreSQL, through
// LISTEN/NOTIFY). It never blocks: calls made before the woken poll
// starts are merged into it. A Wake before Start makes the first poll
// happen at once. With several stores ([NewMulti]) the woken poll reads
// the store the Selector picks next.
//
// A woken poll ignores Config.SkipRecent. SkipRecent keeps the poller
// from racing this node's hot path for rows it just published; the rows
// a wake-up is about were published unowned (a plain *sql.Tx, or another
// node without a hot path) and no hot path will deliver them, so waiting
// would only delay them. This node's own hot-path rows that the woken
// claim takes as well are skipped while the dispatcher holds them (an
// event is never held twice); only an after-commit hand-off that lags
// behind a whole claim and delivery could deliver one twice, which
// at-least-once delivery allows.
func (p *Poller) Wake() { p.run.Wake() }

// wokenKey marks the context of a woken poll.
type wokenKey struct{}

// wokenContext returns ctx marked as the context of a woken poll when
// woken.
func wokenContext(ctx context.Context, woken bool) context.Context {
	if !woken {
		return ctx
	}
	return context.WithValue(ctx, wokenKey{}, true)
}

// skipRecent is the SkipRecent of a claim made with ctx: 0 in a woken
// poll, Config.SkipRecent otherwise.
func (p *Poller) skipRecent(ctx context.Context) (d time.Duration) {
	if woken, _ := ctx.Value(wokenKey{}).(bool); woken {
		return 0
	}
	return p.cfg.SkipRecent
}
