package poller

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// probes runs the probes of the loop's failing stores (see
// [Poller.passTurn]); its ctx ends when the loop stops.
type probes struct {
	ctx context.Context
	wg  sync.WaitGroup
}

// passTurn reports whether the loop passes t's turn to the next store
// (engine.Skip.Pass): while t is skipped after failed polls, and once its
// skip ended while a probe finds out whether its database answers again.
// A failed poll may take QueryTimeout (a database that does not answer);
// polled in the loop, it held up every other store's polls and the claims
// of the events after finished ordered ones (successors.go) for that long
// at each try. The probe, one cheap statement bounded by QueryTimeout,
// runs beside the loop; when it succeeds the store is polled at its next
// turn.
func (p *Poller) passTurn(pr *probes, t *target) bool {
	return t.skip.Pass(func(ended func()) {
		pr.wg.Add(1)
		go func() {
			defer pr.wg.Done()
			defer ended()
			p.probe(pr.ctx, t)
		}()
	})
}

// probe reaps t's expired leases (reapTarget: each statement bounded by
// QueryTimeout) to learn whether the database answers: a success ends
// t's back-off (its next turn in the rotation polls it), a failure
// extends it.
func (p *Poller) probe(ctx context.Context, t *target) {
	began := time.Now()
	_, err := p.reapTarget(ctx, t)
	switch {
	case ctx.Err() != nil: // the loop stopped: nothing learnt
	case err != nil:
		t.skip.Record(true, time.Since(began))
		t.log.Debug("poller: the store still fails; its polls stay suspended", slog.String("error", err.Error()))
	default:
		t.skip.Record(false, 0)
	}
}
