package jdbcstore

import (
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// Notifier is implemented by dialects whose database can tell other
// sessions that a transaction committed new events (PostgreSQL's
// LISTEN/NOTIFY). It is an optimisation only: polling stays the backstop.
//
// The store runs the notify statement on the publishing transaction right
// after inserting an unowned event (one no hot path of this process will
// deliver: published on a plain *sql.Tx, or without a dispatcher); the
// database must deliver the notification only if that transaction
// commits. Events leased to the publishing node at insert need no
// notification: no other node may claim them while the lease runs.
// outbox.New runs Listen while the outbox runs and wakes its poller on
// every notification (a tenant.Outbox runs one per database of its set and
// wakes the poll of that database), so such an event is claimed within
// milliseconds of its commit instead of after the poller's interval.
type Notifier interface {
	// NotifyStatement returns the statement, with '?' placeholders, that
	// announces a new event of table, and its arguments.
	NotifyStatement(table string) (query string, args []any)
	// Listen listens for the announcements of table on a connection to
	// db's database, held for as long as it runs (PostgreSQL's opens one
	// of its own, besides db's pool), and calls wake for each (wake must
	// not block; bursts may be coalesced). It also calls wake each time
	// it starts listening, since announcements made while it was not
	// listening are lost. A lost connection is replaced with backoff and
	// logged on log once per incident, then when it recovers. Listen
	// returns when ctx ends, or at once when db's driver cannot listen
	// (after logging why).
	Listen(ctx context.Context, db *sqlx.DB, table string, log *slog.Logger, wake func())
}

// announce runs the dialect's notify statement, if it has one, on ex: once
// ex's transaction commits, every node's poller is woken (see Notifier).
// The store announces the events no hot path will deliver: inserted
// unowned, replayed, released by a discard of the DEAD event before
// them, or whose leases a closing node released (ReleaseLeases).
func (s *Store) announce(ctx context.Context, ex core.Execer) error {
	if s.q.notify == "" {
		return nil
	}
	_, err := ex.ExecContext(ctx, s.q.notify, s.q.notifyArgs...)
	return err
}
