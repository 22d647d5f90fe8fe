package jdbcstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// MaxBlockedKeys bounds one call of BlockedKeys.
const MaxBlockedKeys = MaxListLimit

// BlockedKey is an ordering key held by a DEAD event under the block
// policy (core.BlockOnDead): its later events wait until that event is
// replayed (and delivered) or discarded.
type BlockedKey struct {
	Key       string    // the ordering key
	EventID   string    // the DEAD event holding it
	EventType string    // its event type
	Seq       int64     // its position in the key
	DiedAt    time.Time // when it went DEAD (its created_at for rows written before done_at was set on DEAD)
	LastError string    // why it died
}

// blockingDead is the condition of a DEAD row, of the store's table,
// that holds its key.
func (s *Store) blockingDead() string {
	return "status = " + strconv.Itoa(int(core.StatusDead)) + " AND order_key IS NOT NULL AND order_skip = 0"
}

// CountBlockedKeys counts the ordering keys held by a DEAD event under
// the block policy, in one read-only statement (the count of
// Stats.BlockedKeys).
func (s *Store) CountBlockedKeys(ctx context.Context) (int, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	n, err := s.countBlockedKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: jdbcstore: count blocked keys: %w", err)
	}
	return n, nil
}

func (s *Store) countBlockedKeys(ctx context.Context) (int, error) {
	return retryBusy(ctx, s, func() (int, error) {
		var n int
		err := s.db.QueryRowContext(ctx, s.q.countBlocked).Scan(&n)
		return n, err
	})
}

// BlockedKeys returns up to limit (1..MaxBlockedKeys) of the keys held by
// a DEAD event under the block policy, with the event holding each (the
// first of the key, should it hold several), longest blocked first. Pass
// an event's id to ReplayDead or DiscardDead to release its key.
func (s *Store) BlockedKeys(ctx context.Context, limit int) ([]BlockedKey, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if limit < 1 || limit > MaxBlockedKeys {
		return nil, &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d, got %d", MaxBlockedKeys, limit)}
	}
	t := s.dialect.QuoteIdent(s.table)
	dead := strconv.Itoa(int(core.StatusDead))
	q := sqlx.Rebind(s.dialect.BindType(), "SELECT "+selectList(s.dialect)+" FROM "+t+" WHERE "+s.blockingDead()+
		" AND NOT EXISTS (SELECT 1 FROM "+t+" p WHERE p.order_key = "+t+".order_key AND p.order_seq < "+t+".order_seq"+
		" AND p.status = "+dead+" AND p.order_skip = 0)"+
		" ORDER BY COALESCE(done_at, created_at), order_key LIMIT ?")
	recs, err := s.queryRecords(ctx, limit, q, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: blocked keys: %w", err)
	}
	keys := make([]BlockedKey, len(recs))
	for i, r := range recs {
		died := r.DoneAt
		if died.IsZero() {
			died = r.CreatedAt
		}
		keys[i] = BlockedKey{Key: r.OrderKey, EventID: r.ID, EventType: r.Type, Seq: r.OrderSeq, DiedAt: died, LastError: r.LastError}
	}
	return keys, nil
}

// DiscardOptions tunes DiscardDead.
type DiscardOptions struct {
	// All must be set to discard every DEAD event when the filter is
	// empty, so an empty filter never deletes everything by accident.
	All bool
	// DryRun counts (and returns the ids of) what would be discarded,
	// deleting nothing.
	DryRun bool
	// BatchSize is the most rows deleted per statement, 1..MaxListLimit
	// (each batch is read as one page of the dead letters). Defaults to
	// DefaultOpsBatch.
	BatchSize int
}

// DiscardResult tells what DiscardDead did (or would do).
type DiscardResult struct {
	Matched   int // DEAD rows matching the filter
	Discarded int // rows deleted (0 in a dry run)
	// IDs are the ids deleted (in a dry run: that would be), in id order.
	IDs []string
	// NotDiscarded are the events matched but not deleted, in id order:
	// they stopped being DEAD between the read of their batch and its
	// write (ReasonNoLongerDead). Matched is len(IDs) + len(NotDiscarded).
	NotDiscarded []Unchanged
}

// DiscardDead deletes the DEAD events matching f, in batches of
// BatchSize (each its own short statement, the batch selected without
// reading payloads and headers, as by ListDeadSummaries): they are never
// delivered.
// Discarding the DEAD event that holds an ordering key (block policy)
// releases the key: its next event is delivered by the poller as if the
// discarded one had succeeded. A row that stopped being DEAD meanwhile
// (replayed by someone else) is kept, and reported in NotDiscarded.
//
// When ctx ends, DiscardDead returns what it deleted with ctx's error,
// counting a batch whose commit ctx cut short but which was committed
// all the same, as ReplayDead does.
func (s *Store) DiscardDead(ctx context.Context, f DeadFilter, o DiscardOptions) (DiscardResult, error) {
	if ctx == nil {
		return DiscardResult{}, core.ErrNilContext
	}
	if f.empty() && !o.All {
		return DiscardResult{}, &core.ConfigError{Field: "filter", Msg: "is empty: give ids, a type, a tenant or a time range, or set All"}
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultOpsBatch
	}
	if o.BatchSize < 1 || o.BatchSize > MaxListLimit {
		return DiscardResult{}, &core.ConfigError{Field: "BatchSize", Msg: fmt.Sprintf("must be 1..%d", MaxListLimit)}
	}
	f = s.splitIDs(f)
	var res DiscardResult
	after := ""
	for {
		page, err := s.listSummaries(ctx, f, after, o.BatchSize)
		if err != nil {
			return res, err
		}
		if len(page) == 0 {
			return res, nil
		}
		res.Matched += len(page)
		after = page[len(page)-1].ID
		if o.DryRun {
			for _, r := range page {
				res.IDs = append(res.IDs, r.ID)
			}
			continue
		}
		if s.deadPageHook != nil {
			s.deadPageHook(page)
		}
		deleted, err := s.discardPage(ctx, page)
		if err != nil && deleted == nil {
			return res, err
		}
		// A batch committed as ctx ended is counted (see discardPage).
		res.Discarded += len(deleted)
		res.IDs, res.NotDiscarded = sortOut(page, deleted, nil, res.IDs, res.NotDiscarded)
		if err != nil {
			return res, err
		}
	}
}

// discardPage deletes the rows of page that are still DEAD and returns
// their ids: one DELETE ... RETURNING where the database has it (SQLite,
// PostgreSQL), otherwise (MySQL/MariaDB) a read of the rows FOR UPDATE
// and the DELETE of those, in one transaction.
//
// When the commit fails (ctx ended while it ran), the rows are read back
// (see ownBatch): if the batch was committed all the same, its ids are
// returned with the error, so that the caller counts them.
func (s *Store) discardPage(ctx context.Context, page []DeadSummary) (map[string]bool, error) {
	return s.ownBatch(ctx, "discard dead", "discarded", page[0].ID, func(tx *sqlx.Tx) (map[string]bool, error) {
		deleted, err := s.discardIn(ctx, tx, page)
		if err != nil || len(deleted) == 0 {
			return deleted, err
		}
		// The next event of a key a discarded event held is unowned:
		// wake every node.
		return deleted, s.announce(ctx, tx)
	})
}

// discardIn is discardPage's work in tx.
func (s *Store) discardIn(ctx context.Context, tx *sqlx.Tx, page []DeadSummary) (map[string]bool, error) {
	d := s.dialect
	t := d.QuoteIdent(s.table)
	still := ") AND status = " + strconv.Itoa(int(core.StatusDead))
	if d.Capabilities().Returning {
		return queryIDs(ctx, tx, inList(d, "DELETE FROM "+t+" WHERE event_id IN (", len(page), still+" RETURNING event_id"),
			len(page), pageIDs(page)...)
	}
	locked, err := queryIDs(ctx, tx, inList(d, "SELECT event_id FROM "+t+" WHERE event_id IN (", len(page), still+" FOR UPDATE"),
		len(page), pageIDs(page)...)
	if err != nil || len(locked) == 0 {
		return nil, err
	}
	ids := make([]any, 0, len(locked))
	for id := range locked {
		ids = append(ids, id)
	}
	n, err := execCount(ctx, tx, inList(d, "DELETE FROM "+t+" WHERE event_id IN (", len(ids), still), ids...)
	if err != nil {
		return nil, err
	}
	if n != int64(len(ids)) {
		return nil, fmt.Errorf("deleted %d of the %d rows it had locked", n, len(ids))
	}
	return locked, nil
}

var _ core.KeyWaiters = (*Store)(nil)

// Waiting reports whether a NEW or RETRY event of one of keys has no
// owner (inserted behind a pending event of its key) or an owner whose
// lease ended (a node that is gone): it waits for a poller (see
// core.KeyWaiters). It reads the order index only. An empty keys reports
// false.
func (s *Store) Waiting(ctx context.Context, keys []string) (bool, error) {
	if ctx == nil {
		return false, core.ErrNilContext
	}
	if len(keys) == 0 {
		return false, nil
	}
	args := make([]any, len(keys), len(keys)+1)
	for i, k := range keys {
		args[i] = k
	}
	args = append(args, s.dialect.EncodeTime(s.now()))
	query := inList(s.dialect, s.q.waitingPrefix, len(keys), s.q.waitingSuffix)
	found, err := retryBusy(ctx, s, func() (bool, error) {
		var one int
		err := s.db.QueryRowContext(ctx, query, args...).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return false, fmt.Errorf("outbox: jdbcstore: waiting events of %d keys: %w", len(keys), err)
	}
	return found, nil
}
