package outbox

import (
	"context"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// Get returns the stored record of the event with id: its status,
// attempts, last error and times. It returns an error matching
// core.ErrNotFound when no such row exists (never published, rolled back,
// or purged by the cleanup).
func (o *Outbox) Get(ctx context.Context, id string) (core.Record, error) {
	if ctx == nil {
		return core.Record{}, core.ErrNilContext
	}
	return o.store.Get(ctx, id)
}

// CountByStatus returns how many events the table holds in each status:
// every status is in the map, with 0 when it has no rows.
func (o *Outbox) CountByStatus(ctx context.Context) (map[core.Status]int, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	return o.store.CountByStatus(ctx)
}

// DispatcherStats returns what the outbox holds in memory now: the lengths
// of its hot and cold queues, the events waiting on an in-process retry
// timer and the payload and header bytes held (bounded by
// dispatcher.Config.MaxHeldBytes). It reads no database.
func (o *Outbox) DispatcherStats() dispatcher.Stats { return o.dispatcher.Stats() }
