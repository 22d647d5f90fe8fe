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
// returns the position), then inserts the row. The insert takes lease
// only if the event before has finished (DONE, deleted, or DEAD under the
// skip policy), checked in the same statement; when that event still
// holds the key (NEW, RETRY, or DEAD under the block policy) a second
// statement inserts the row without an owner: it waits for a poller,
// which claims an ordered row only once its predecessor finished. So the
// hot path delivers an event of a free key right after commit.
//
// It costs one statement more than Insert (the upsert) when the key is
// free, two when it is held, and serializes the transactions that
// publish on one key. ex must be a transaction that can run queries
// (*sql.Tx, *sqlx.Tx, txctx's Tx); the store's own pool is refused, since
// an autocommit insert could leave a gap in the key's positions.
func (s *Store) InsertOrdered(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if err := ctxDone(ctx, "insert"); err != nil {
		return false, err
	}
	leased, _, err := s.insertOrdered(ctx, ex, env, lease, nil)
	if err == nil {
		s.checkBeforeCommit(ex, env.ID())
	}
	return leased, err
}

// insertOrdered is InsertOrdered without the check before commit, which
// the caller registers once its rows are sure to stay (InsertBatch may
// take the row back). seq is the position the event took from the keys
// table, 0 where the store keeps none (SQLite).
//
// An event whose id exists gives the position it took back in ex, so that
// a caller who goes on and commits (a duplicate leaves ex usable) leaves
// no gap: a gap would let the event after it pass a pending one, since an
// event waits for the position right before its own only.
//
// args, when not nil, are the row's arguments (rowArgs at position 0),
// encoded already by the caller; they are used where a keys table gives
// the position.
func (s *Store) insertOrdered(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease, args []any) (leased bool, seq int64, err error) {
	key := env.OrderKey()
	switch {
	case ex == nil:
		return false, 0, fmt.Errorf("outbox: jdbcstore: insert: %w", core.ErrNoTransaction)
	case key == "":
		return false, 0, fmt.Errorf("outbox: jdbcstore: insert %q: %w: the event has no ordering key", env.ID(), core.ErrNoOrderKey)
	case s.ownsExecer(ex):
		return false, 0, fmt.Errorf("outbox: jdbcstore: insert %q: %w: an ordered event needs a transaction, not the database handle", env.ID(), core.ErrOrderingUnsupported)
	}
	q, ok := ex.(rowQuerier)
	if !ok {
		return false, 0, fmt.Errorf("outbox: jdbcstore: insert %q: %w: the transaction (%T) cannot run queries", env.ID(), core.ErrOrderingUnsupported, ex)
	}
	if err := s.checkExecer(ex, env.ID()); err != nil {
		return false, 0, err // before any statement: nothing is written
	}
	if err := s.checkOpen(ctx, ex, env.ID()); err != nil {
		return false, 0, err
	}
	if s.q.lastOfKey != "" {
		if err := env.Validate(); err != nil {
			return false, 0, fmt.Errorf("outbox: jdbcstore: insert: %w", err)
		}
		leased, err := s.insertAfterLast(ctx, ex, q, env, lease)
		return leased, 0, err
	}
	// The row is checked and encoded before the position is taken: an
	// invalid event or one that cannot be encoded writes nothing.
	if args == nil {
		if args, err = s.rowArgs(env, lease, 0); err != nil {
			return false, 0, err
		}
	}
	byID := s.byID()
	seq, err = s.nextSeq(ctx, ex, q, key, env.ID(), byID)
	if err != nil {
		return false, 0, s.abortedNote(ex, s.mapError("take the next position of key", key, err))
	}
	// From the second position on, the row takes lease only if the event
	// before has finished: the insert itself checks, in one statement,
	// unless the store remembers that event as committed and DONE here.
	// The position the upsert returned, taken under the key row's lock,
	// proves that event is the one before: positions have no gaps.
	ifFree := seq - 1
	cache, tx := s.keyCacheFor(ex)
	if cache != nil {
		if last, ok := cache.lookup(key); ok && last.done && last.seq == seq-1 {
			ifFree = 0
		}
	}
	args[argPos] = seq
	leased, err = s.insertRowArgs(ctx, ex, env, lease, args, ifFree, byID)
	if errors.Is(err, core.ErrDuplicateEvent) {
		// The failed insert left ex usable (and on MySQL rolled back that
		// statement only): give the position back. After another error ex
		// must be rolled back, which returns it; a statement run then
		// could run outside the transaction, should the database have
		// ended it.
		return false, 0, s.giveBack(ctx, ex, map[string]taken{key: {last: seq, n: 1}}, err)
	}
	if err != nil {
		return false, 0, err
	}
	if cache != nil {
		cache.afterCommit(tx, env.ID(), key, seq)
	}
	return leased, seq, nil
}

// taken is what a transaction took from one key's positions: n of them,
// the last being last.
type taken struct {
	last, n int64
}

// giveBack returns to the keys table, in ex, the positions keys took,
// after cause stopped their events' rows (which are not in the table, or
// were taken back): each key's last position goes back by n, but only
// where it still is the one the transaction took (ex holds the key's
// row lock since it took it, so it is). It returns cause, with a note to
// roll ex back when a position could not be given back (on PostgreSQL a
// failed statement has aborted ex anyway).
func (s *Store) giveBack(ctx context.Context, ex core.Execer, keys map[string]taken, cause error) error {
	query := s.q.giveBack
	if s.byID() {
		query = s.q.giveBackByID // the ids recorded are no longer the key's
	}
	for key, t := range keys {
		res, err := ex.ExecContext(ctx, query, t.n, key, t.last)
		if err == nil {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n != 1 {
				err = fmt.Errorf("key %q is no longer at position %d", key, t.last)
			}
		}
		if err != nil {
			return fmt.Errorf("%w; giving back the positions it took failed, roll the transaction back: %w", cause, err)
		}
	}
	return cause
}

// keyCacheFor returns the store's key cache and ex as a transaction with
// after-commit hooks, or nil when the store keeps no cache or ex has no
// hooks to record the commit with.
func (s *Store) keyCacheFor(ex core.Execer) (*keyCache, core.Tx) {
	c := s.keys.Load()
	tx, ok := ex.(core.Tx)
	if c == nil || !ok {
		return nil, nil
	}
	return c, tx
}

// insertAfterLast is InsertOrdered on a single-writer database (SQLite):
// no other transaction can write between its two statements, so it reads
// the key's last event, inserts the row at the position after it, and
// takes lease only if that event no longer holds the key. A rollback takes
// the row, and so its position, away; a key whose rows were all purged
// starts again at 1, which holds nobody up.
//
// When the store remembers that the key's last event was committed and
// DONE here (keyCache, in a transaction with after-commit hooks), it skips
// the read and inserts at the next position with lease, in a statement
// that inserts nothing unless an event at the remembered position is
// still there, finished. With the schema's trigger, which refuses a
// position at or below an existing one, that event is the key's last and
// holds nobody up: the insert is the one the read would have chosen. When
// another process published on the key meanwhile (the trigger refuses the
// position), or the remembered event is gone (purged, the key since
// started again at position 1, perhaps by another process, whose event
// may be pending) or holds the key, the store reads after all.
func (s *Store) insertAfterLast(ctx context.Context, ex core.Execer, q rowQuerier, env core.Envelope, lease core.Lease) (bool, error) {
	key := env.OrderKey()
	cache, tx := s.keyCacheFor(ex)
	remember := func(seq int64) {
		if cache != nil {
			cache.afterCommit(tx, env.ID(), key, seq)
		}
	}
	if cache != nil {
		if last, ok := cache.lookup(key); ok && last.done {
			args, err := s.rowArgs(env, lease, last.seq+1)
			if err != nil {
				return false, err
			}
			n, err := s.execInsert(ctx, ex, false, env.ID(), s.q.insertAfterFinished, append(args, key, last.seq)...)
			switch {
			case err == nil && n == 1:
				if lease.IsZero() {
					// As insertRow does: no hot path delivers an unowned event.
					if err := s.announce(ctx, ex); err != nil {
						return false, fmt.Errorf("outbox: jdbcstore: insert %q: notify: %w", env.ID(), err)
					}
				}
				remember(last.seq + 1)
				return !lease.IsZero(), nil
			case err != nil && !isStalePosition(err):
				return false, err
			}
			cache.forget(key) // the key changed behind this store: read it
		}
	}
	var seq, status, skip int64
	switch err := q.QueryRowContext(ctx, s.q.lastOfKey, key).Scan(&seq, &status, &skip); {
	case errors.Is(err, sql.ErrNoRows):
		seq = 0
	case err != nil:
		return false, s.mapError("read the last event of key", key, err)
	case holds(core.Status(status), skip != 0):
		lease = core.Lease{} // wait for the poller, behind it
	}
	leased, err := s.insertRow(ctx, ex, env, lease, seq+1, 0)
	if err == nil {
		remember(seq + 1)
	}
	return leased, err
}

// nextSeq takes the next position of key in ex for the event id; byID
// records id in the keys row (Capabilities.PredecessorByID).
func (s *Store) nextSeq(ctx context.Context, ex core.Execer, q rowQuerier, key, id string, byID bool) (int64, error) {
	if s.q.nextSeqByInsertID {
		query, args := s.q.nextSeq, []any{key}
		if byID {
			query, args = s.q.nextSeqByID, []any{key, id, id}
		}
		res, err := ex.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	var seq int64
	err := q.QueryRowContext(ctx, s.q.nextSeq, key).Scan(&seq)
	return seq, err
}

// ctxDone returns an error wrapping ctx's when ctx is done: an insert is
// then never sent (database/sql would refuse it too), so the caller's
// transaction is untouched and no note says it was aborted.
func ctxDone(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outbox: jdbcstore: %s: %w (nothing was sent; the transaction is unchanged)", what, err)
	}
	return nil
}

// abortedNote adds, on a database whose failed statements abort the
// transaction (PostgreSQL), that the caller's transaction must be rolled
// back; not for a transaction that had ended already (sql.ErrTxDone: the
// statement never reached the database).
func (s *Store) abortedNote(ex core.Execer, err error) error {
	if !s.ownsExecer(ex) && s.dialect.Capabilities().FailedStatementAbortsTx && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w (the database aborted the transaction: roll it back)", err)
	}
	return err
}

// holds reports whether an event with status (and skip, its dead policy
// being skip) holds its key's later events: pending, or DEAD under the
// block policy. It is the Go form of holdsKey.
func holds(status core.Status, skip bool) bool {
	switch status {
	case core.StatusNew, core.StatusRetry:
		return true
	case core.StatusDead:
		return !skip
	}
	return false
}
