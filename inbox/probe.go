package inbox

import (
	"context"
	"log/slog"
)

// passTurn reports whether the loop passes m's turn to the next inbox
// (engine.Skip.Pass): while m is skipped after failed claims, and once its
// skip ended while a probe finds out whether its database answers again.
// A failed claim may take StatusTimeout (a database that does not
// answer); made in the loop, it held up every other inbox's claims for
// that long at each try. The probe, a reaping of m's expired leases
// bounded by StatusTimeout, runs beside the loop (ctx ends it); when it
// succeeds, m is claimed from at its next turn.
func (d *Dispatcher) passTurn(ctx context.Context, m *member) bool {
	return m.skip.Pass(func(ended func()) {
		if !m.work.Hold() { // being removed
			ended()
			return
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer ended()
			defer m.work.Release()
			onMember(ctx, m, d.probe)
		}()
	})
}

// probe reaps m's expired leases (reapWithin, bounded by StatusTimeout)
// to learn whether its database answers: a success ends m's back-off and
// wakes the loop, a failure extends it.
func (d *Dispatcher) probe(ctx context.Context, m *member) {
	took, err := d.reapWithin(ctx, m, d.cfg.StatusTimeout)
	switch {
	case ctx.Err() != nil: // Close or the inbox's removal: nothing learnt
	case err != nil:
		m.skip.Record(true, took)
		m.log.LogAttrs(ctx, slog.LevelDebug, "inbox: the database still fails; its claims stay suspended", slog.String("error", err.Error()))
	default:
		m.skip.Record(false, 0)
	}
}
