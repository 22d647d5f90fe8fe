package jdbcstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outbox-go/outbox/core"
)

var _ core.OrderedInserter = (*Store)(nil)

// InsertOrdered inserts env, which has an OrderKey, as the next event of
// its key and reports whether it used lease (see core.OrderedInserter).
//
// In ex, the caller's transaction, it takes the key's next position from
// the keys table (an upsert that locks the key's row until ex ends: a
// second transaction publishing on the key waits there, so positions
// follow the order in which the transactions commit, and a rollback
// returns the position), then looks at the event before it. When that
// event still holds the key (NEW, RETRY, or DEAD under the block policy)
// the row is inserted without an owner, whatever lease says: it waits for
// a poller, which claims an ordered row only once its predecessor
// finished. Otherwise the row takes lease and the hot path delivers it
// right after commit.
//
// It costs two statements more than Insert (the upsert and the
// predecessor's primary-key-like lookup), and serializes the transactions
// that publish on one key. ex must be a transaction that can run queries
// (*sql.Tx, *sqlx.Tx, txctx's Tx); the store's own pool is refused, since
// an autocommit insert could leave a gap in the key's positions.
func (s *Store) InsertOrdered(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease) (bool, error) {
	key := env.OrderKey()
	switch {
	case ex == nil:
		return false, fmt.Errorf("outbox: jdbcstore: insert: %w", core.ErrNoTransaction)
	case key == "":
		return false, fmt.Errorf("outbox: jdbcstore: insert %q: %w: the event has no ordering key", env.ID(), core.ErrNoOrderKey)
	case s.ownsExecer(ex):
		return false, fmt.Errorf("outbox: jdbcstore: insert %q: %w: an ordered event needs a transaction, not the database handle", env.ID(), core.ErrOrderingUnsupported)
	}
	q, ok := ex.(rowQuerier)
	if !ok {
		return false, fmt.Errorf("outbox: jdbcstore: insert %q: %w: the transaction (%T) cannot run queries", env.ID(), core.ErrOrderingUnsupported, ex)
	}
	if err := env.Validate(); err != nil {
		return false, fmt.Errorf("outbox: jdbcstore: insert: %w", err)
	}
	seq, err := s.nextSeq(ctx, ex, q, key)
	if err != nil {
		return false, s.abortedNote(ex, s.mapError("take the next position of key", key, err))
	}
	if seq > 1 && !lease.IsZero() {
		held, err := s.predecessorHolds(ctx, q, key, seq-1)
		if err != nil {
			return false, s.abortedNote(ex, s.mapError("read the event before in key", key, err))
		}
		if held {
			lease = core.Lease{} // wait for the poller, behind the predecessor
		}
	}
	if err := s.insert(ctx, ex, env, lease, seq); err != nil {
		return false, err
	}
	return !lease.IsZero(), nil
}

// nextSeq takes the next position of key in ex.
func (s *Store) nextSeq(ctx context.Context, ex core.Execer, q rowQuerier, key string) (int64, error) {
	if s.q.nextSeqByInsertID {
		res, err := ex.ExecContext(ctx, s.q.nextSeq, key)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	var seq int64
	err := q.QueryRowContext(ctx, s.q.nextSeq, key).Scan(&seq)
	return seq, err
}

// predecessorHolds reports whether the event at position seq of key
// still holds the key's later events: pending, or DEAD under the block
// policy. A missing event (purged or discarded) does not.
func (s *Store) predecessorHolds(ctx context.Context, q rowQuerier, key string, seq int64) (bool, error) {
	var status, skip int64
	err := q.QueryRowContext(ctx, s.q.predecessor, key, seq).Scan(&status, &skip)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch core.Status(status) {
	case core.StatusNew, core.StatusRetry:
		return true, nil
	case core.StatusDead:
		return skip == 0, nil
	}
	return false, nil
}

// abortedNote adds, on a database whose failed statements abort the
// transaction (PostgreSQL), that the caller's transaction must be rolled
// back.
func (s *Store) abortedNote(ex core.Execer, err error) error {
	if !s.ownsExecer(ex) && s.dialect.Capabilities().FailedStatementAbortsTx {
		return fmt.Errorf("%w (the database aborted the transaction: roll it back)", err)
	}
	return err
}
