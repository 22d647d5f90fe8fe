package jdbcstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ctxerr"
)

// Bounds of one statement of a batch insert.
const (
	// insertArgs is the number of arguments of one row of the insert.
	insertArgs = 16
	// maxBatchRows bounds the rows of one multi-row INSERT: past a few
	// hundred rows a longer statement saves nothing measurable, and the
	// server parses (and plans) every distinct row count anew.
	maxBatchRows = 500
	// maxBatchBytes bounds the payload and header bytes of one statement
	// (one row may exceed it alone), far below MySQL's smallest
	// max_allowed_packet.
	maxBatchBytes = 1 << 20
	// defaultMaxBindParams is Capabilities.MaxBindParams when the dialect
	// leaves it zero.
	defaultMaxBindParams = 999
)

var _ core.BatchInserter = (*Store)(nil)

// rowsQuerier runs a query returning rows (*sql.Tx, *sqlx.Tx and txctx's
// Tx do).
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// InsertBatch stores every envs[i] with status NEW on ex, owned by
// leases[i] (unowned when zero), as [Store.Insert] would, and reports
// which rows took their lease (see core.BatchInserter). The events
// without an OrderKey go in multi-row INSERT statements of up to 500
// rows each (fewer when the dialect's Capabilities.MaxBindParams or a
// megabyte of payloads says so): on ex, a transaction, one statement for
// a batch of ten costs about what one single-row insert does. The
// ordered ones follow, one by one, each key's in slice order and the keys
// in key order (so that batches on the same keys never deadlock each
// other), as [Store.InsertOrdered]
// inserts them (several events of one key take consecutive positions; the
// first takes its lease only if the key is free, the later ones wait for
// the poller behind it). An unowned row announces itself once for the
// batch on a [Notifier] dialect.
//
// Every envelope is checked before anything is written: an invalid one,
// or two with the same id, returns a *core.BatchError naming the first
// bad one. A duplicate of an id already in the table also returns a
// *core.BatchError (wrapping core.ErrDuplicateEvent), after taking back
// the rows the batch had inserted, so that none of envs is left and ex is
// still usable (on PostgreSQL the duplicate is detected without a failed
// statement, as in Insert); the positions its ordered events took in their
// keys are given back, so a commit leaves no gap. Any other error leaves
// what was inserted: roll ex back.
//
// ex may be the store's own database: the batch then runs in a
// transaction of its own, retried as a whole on lock contention.
func (s *Store) InsertBatch(ctx context.Context, ex core.Execer, envs []core.Envelope, leases []core.Lease) ([]bool, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := ctxDone(ctx, "insert batch"); err != nil {
		return nil, err
	}
	if len(leases) != len(envs) {
		return nil, fmt.Errorf("outbox: jdbcstore: insert batch: %d leases for %d events", len(leases), len(envs))
	}
	first := ""
	if len(envs) > 0 {
		first = envs[0].ID()
	}
	if err := s.checkExecer(ex, first); err != nil {
		return nil, err
	}
	if len(envs) == 0 {
		return nil, nil
	}
	if err := checkBatch(envs, leases); err != nil {
		return nil, err
	}
	if s.ownsExecer(ex) {
		return s.insertBatchOwnTx(ctx, envs, leases)
	}
	if err := s.checkOpen(ctx, ex, first); err != nil {
		return nil, err
	}
	return s.insertBatch(ctx, ex, envs, leases)
}

// checkBatch validates every envelope and lease owner and refuses two
// events with one id.
func checkBatch(envs []core.Envelope, leases []core.Lease) error {
	seen := make(map[string]int, len(envs))
	for i, env := range envs {
		if err := env.Validate(); err != nil {
			return batchError(i, env, fmt.Errorf("outbox: jdbcstore: insert: %w", err))
		}
		if j, dup := seen[env.ID()]; dup {
			return batchError(i, env, fmt.Errorf("outbox: jdbcstore: insert %q: %w: event %d of the batch has the same id",
				env.ID(), core.ErrDuplicateEvent, j))
		}
		seen[env.ID()] = i
		if !leases[i].IsZero() {
			if err := validOwner(leases[i].Owner); err != nil {
				return batchError(i, env, fmt.Errorf("outbox: jdbcstore: insert %q: %w", env.ID(), err))
			}
		}
	}
	return nil
}

// batchError is the error of event i of a batch.
func batchError(i int, env core.Envelope, err error) error {
	return &core.BatchError{Index: i, ID: env.ID(), Err: err}
}

// insertBatchOwnTx is InsertBatch on the store's own database: one
// transaction of the store, under the write gate, run again while the
// database reports lock contention.
func (s *Store) insertBatchOwnTx(ctx context.Context, envs []core.Envelope, leases []core.Lease) ([]bool, error) {
	ctx, release, err := s.gate.Acquire(ctx)
	if err != nil {
		return nil, s.mapError("insert batch", envs[0].ID(), err)
	}
	defer release()
	return retryBusy(ctx, s, func() ([]bool, error) {
		tx, err := s.db.BeginTxx(ctx, nil)
		if err != nil {
			return nil, s.mapError("insert batch: begin", "", err)
		}
		leased, err := s.insertBatch(ctx, tx, envs, leases)
		if err != nil {
			_ = tx.Rollback()
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, s.mapError("insert batch: commit", "", ctxerr.OfCommit(ctx, err))
		}
		return leased, nil
	})
}

// insertBatch is InsertBatch on ex, a transaction, for checked envs.
func (s *Store) insertBatch(ctx context.Context, ex core.Execer, envs []core.Envelope, leases []core.Lease) ([]bool, error) {
	leased := make([]bool, len(envs))
	var plain, ordered []int
	for i, env := range envs {
		if env.OrderKey() != "" {
			ordered = append(ordered, i)
		} else {
			plain = append(plain, i)
		}
	}
	if len(ordered) > 0 {
		if _, ok := ex.(rowQuerier); !ok {
			i := ordered[0]
			return nil, batchError(i, envs[i], fmt.Errorf("outbox: jdbcstore: insert %q: %w: the transaction (%T) cannot run queries",
				envs[i].ID(), core.ErrOrderingUnsupported, ex))
		}
		// The keys are taken in key order (each key's events in the
		// order of envs): two batches naming the same keys in different
		// orders would otherwise each hold a key the other waits for (a
		// deadlock on the keys table's rows), and nothing orders events
		// of different keys.
		slices.SortStableFunc(ordered, func(a, b int) int { return strings.Compare(envs[a].OrderKey(), envs[b].OrderKey()) })
	}
	// Every row is encoded before the first statement, so that a bad
	// one writes nothing.
	now := s.now()
	args := make([]any, 0, len(plain)*insertArgs)
	sizes := make([]int, len(plain))
	unowned := false
	for k, i := range plain {
		var err error
		if args, err = s.rowValues(args, envs[i], leases[i], 0, now); err != nil {
			return nil, batchError(i, envs[i], err)
		}
		sizes[k] = len(envs[i].RawPayload())
		if h, ok := args[len(args)-insertArgs+8].(string); ok {
			sizes[k] += len(h)
		}
		leased[i] = !leases[i].IsZero()
		unowned = unowned || !leased[i]
	}
	// The ordered rows too, so that one the database would refuse (its
	// JSON column's limits) writes nothing either; their positions are
	// set when taken. (SQLite, which keeps no keys table, encodes them
	// again with the position it reads.)
	orderedArgs := make([][]any, len(ordered))
	for k, i := range ordered {
		var err error
		// Room for insertIfFree's two more, as rowArgs leaves.
		if orderedArgs[k], err = s.rowValues(make([]any, 0, insertArgs+2), envs[i], leases[i], 0, now); err != nil {
			return nil, batchError(i, envs[i], err)
		}
	}
	var inserted []string // ids inserted so far, for the undo
	for start := 0; start < len(plain); {
		end := s.chunkEnd(sizes, start, ex)
		ids, err := s.insertChunk(ctx, ex, envs, plain[start:end], args[start*insertArgs:end*insertArgs])
		inserted = append(inserted, ids...)
		if err != nil {
			return nil, s.undoBatch(ctx, ex, inserted, nil, err)
		}
		start = end
	}
	if len(plain) > 0 {
		if unowned {
			// Wake the pollers of every node once ex commits: no hot path
			// delivers an unowned event.
			if err := s.announce(ctx, ex); err != nil {
				return nil, s.abortedNote(ex, fmt.Errorf("outbox: jdbcstore: insert batch: notify: %w", err))
			}
		}
	}
	// The ordered events come last, so that the locks of their keys are
	// held for the shortest time. Should one of them find its id taken,
	// the rows undone before include ordered ones whose key cache entry
	// (keyCache) still records their commit: harmless, since it records
	// them as not DONE, which only makes the next publish on the key read
	// or check its last event.
	var keys map[string]taken // the positions the batch took, to give back in an undo
	for k, i := range ordered {
		l, seq, err := s.insertOrdered(ctx, ex, envs[i], leases[i], orderedArgs[k])
		if err != nil {
			return nil, s.undoBatch(ctx, ex, inserted, keys, batchError(i, envs[i], err))
		}
		leased[i] = l
		inserted = append(inserted, envs[i].ID())
		if seq > 0 {
			if keys == nil {
				keys = make(map[string]taken)
			}
			t := keys[envs[i].OrderKey()]
			keys[envs[i].OrderKey()] = taken{last: seq, n: t.n + 1}
		}
	}
	// Only now is the batch sure to stay: the check before commit (MySQL)
	// must not name a row an undo took back.
	s.checkBeforeCommit(ex, inserted[0])
	return leased, nil
}

// chunkEnd returns the end of the statement that starts at row start:
// at most the rows the dialect's placeholder limit and maxBatchRows
// allow, at most maxBatchBytes of payloads and headers (but one row at
// least). On a database whose failed statements abort the transaction,
// a transaction that cannot return rows inserts one row per statement,
// so that a duplicate (no row inserted) names its event.
func (s *Store) chunkEnd(sizes []int, start int, ex core.Execer) int {
	if _, ok := ex.(rowsQuerier); !ok && s.q.insertSuffix != "" {
		return start + 1
	}
	rows := min(maxBatchRows, max(1, s.bindLimit()/insertArgs))
	end, bytes := start, 0
	for end < len(sizes) && end-start < rows {
		if end > start && bytes+sizes[end] > maxBatchBytes {
			break
		}
		bytes += sizes[end]
		end++
	}
	return end
}

// insertChunk inserts the rows of envs[idx...] (their arguments in args)
// in one statement and returns the ids it inserted. A duplicate id
// returns a *core.BatchError naming its event.
func (s *Store) insertChunk(ctx context.Context, ex core.Execer, envs []core.Envelope, idx []int, args []any) ([]string, error) {
	query := s.batchStatement(len(idx))
	if s.q.insertSuffix == "" {
		// A duplicate is an error, and the failed statement inserted nothing.
		if _, err := ex.ExecContext(ctx, query, args...); err != nil {
			return nil, s.chunkError(ctx, ex, envs, idx, err)
		}
		return batchIDs(envs, idx), nil
	}
	// INSERT ... ON CONFLICT DO NOTHING: a duplicate is a row missing
	// from what the statement inserted.
	var got map[string]bool
	if q, ok := ex.(rowsQuerier); ok {
		var err error
		if got, err = queryIDs(ctx, q, query, len(idx), args...); err != nil {
			return nil, s.chunkError(ctx, ex, envs, idx, err)
		}
	} else { // one row per statement (chunkEnd)
		res, err := ex.ExecContext(ctx, s.q.insert, args...)
		if err != nil {
			return nil, s.chunkError(ctx, ex, envs, idx, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, s.abortedNote(ex, s.mapError("insert", envs[idx[0]].ID(), err))
		}
		got = map[string]bool{}
		if n == 1 {
			got[envs[idx[0]].ID()] = true
		}
	}
	ids := make([]string, 0, len(got))
	missing := -1
	for _, i := range idx {
		if got[envs[i].ID()] {
			ids = append(ids, envs[i].ID())
		} else if missing < 0 {
			missing = i
		}
	}
	if missing >= 0 {
		return ids, batchError(missing, envs[missing],
			fmt.Errorf("outbox: jdbcstore: insert %q: %w", envs[missing].ID(), core.ErrDuplicateEvent))
	}
	return ids, nil
}

// queryIDs runs query, which returns the event_id of each row it
// inserted, and returns those ids.
func queryIDs(ctx context.Context, q rowsQuerier, query string, n int, args ...any) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[string]bool, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		got[id] = true
	}
	return got, rows.Err()
}

// chunkError maps the error of a chunk's statement. A duplicate id
// becomes a *core.BatchError naming the first event of the chunk whose
// id is in the table, found by a query on ex (the failed statement
// inserted nothing, so those rows are older); when ex cannot run it, the
// error names the chunk's events. Other errors say, on a database whose
// failed statements abort the transaction, to roll it back.
func (s *Store) chunkError(ctx context.Context, ex core.Execer, envs []core.Envelope, idx []int, err error) error {
	first := envs[idx[0]]
	if s.dialect.Classify(err) != ClassDuplicate {
		if len(idx) > 1 {
			return s.abortedNote(ex, fmt.Errorf("outbox: jdbcstore: insert events %d to %d of the batch: %w", idx[0], idx[len(idx)-1], err))
		}
		return s.abortedNote(ex, batchError(idx[0], first, s.mapError("insert", first.ID(), err)))
	}
	if len(idx) == 1 {
		return batchError(idx[0], first, s.mapError("insert", first.ID(), err))
	}
	if q, ok := ex.(rowsQuerier); ok {
		ids := make([]any, len(idx))
		for k, i := range idx {
			ids[k] = envs[i].ID()
		}
		query := inList(s.dialect, "SELECT event_id FROM "+s.dialect.QuoteIdent(s.table)+" WHERE event_id IN (", len(ids), ")")
		if found, qerr := queryIDs(ctx, q, query, 1, ids...); qerr == nil {
			for _, i := range idx {
				if found[envs[i].ID()] {
					return batchError(i, envs[i], s.mapError("insert", envs[i].ID(), err))
				}
			}
		}
	}
	return fmt.Errorf("outbox: jdbcstore: insert events %d to %d of the batch: %w", idx[0], idx[len(idx)-1], s.mapError("insert", "", err))
}

// undoBatch takes back the rows of a batch inserted on ex before err,
// and the positions keys its ordered events took, when err is a
// duplicate id (which leaves ex usable), and returns err; after any other
// error ex is left as it is, for the caller to roll back.
func (s *Store) undoBatch(ctx context.Context, ex core.Execer, inserted []string, keys map[string]taken, err error) error {
	if len(inserted) == 0 || !errors.Is(err, core.ErrDuplicateEvent) {
		return err
	}
	for len(inserted) > 0 {
		n := min(len(inserted), s.bindLimit(), maxBatchRows)
		ids := make([]any, n)
		for k, id := range inserted[:n] {
			ids[k] = id
		}
		query := inList(s.dialect, "DELETE FROM "+s.dialect.QuoteIdent(s.table)+" WHERE event_id IN (", n, ")")
		if _, derr := ex.ExecContext(ctx, query, ids...); derr != nil {
			return fmt.Errorf("%w; taking back the %d events inserted before it failed, roll the transaction back: %w",
				err, len(inserted), derr)
		}
		inserted = inserted[n:]
	}
	return s.giveBack(ctx, ex, keys, err)
}

// batchIDs returns the ids of envs[idx...].
func batchIDs(envs []core.Envelope, idx []int) []string {
	ids := make([]string, len(idx))
	for k, i := range idx {
		ids[k] = envs[i].ID()
	}
	return ids
}

// batchStatement returns the multi-row insert of n rows, rebound for the
// dialect.
func (s *Store) batchStatement(n int) string {
	if n == 1 && s.q.insertSuffix == "" {
		return s.q.insert
	}
	if q, ok := s.batchSQL.Load(n); ok {
		return q.(string)
	}
	var b strings.Builder
	b.Grow(len(s.q.insertPrefix) + n*(len(s.q.insertRow)+2) + len(s.q.insertSuffix))
	b.WriteString(s.q.insertPrefix)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.q.insertRow)
	}
	b.WriteString(s.q.insertSuffix)
	q := sqlx.Rebind(s.dialect.BindType(), b.String())
	s.batchSQL.Store(n, q)
	return q
}
