package jdbcstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/inboxrow"
)

// Touch records a delivery of m on ex, normally the caller's business
// transaction, and returns the row's state. A new key is inserted as Seen
// (first and last seen now, m's topic, payload and hash); an existing row
// gets last_seen_at = now (now + 1 µs if it held now already, so that the
// row differs from the one committed before: see MarkDoneTx) and keeps
// everything else, except that a missing hash is filled in with m's.
//
// It is an upsert (ON CONFLICT … DO UPDATE, ON DUPLICATE KEY UPDATE)
// followed by a locking read where rows lock (MySQL: SELECT … FOR UPDATE,
// which returns the latest committed row even in a REPEATABLE READ
// transaction). Until ex ends, the row is locked: a concurrent Touch of
// the same key on MySQL waits for ex's commit or rollback, and on SQLite
// writers are serialized anyway. So two transactions never both see the
// key as new.
func (s *inboxStore) Touch(ctx context.Context, ex inboxrow.Tx, m inboxrow.Message) (inboxrow.Touch, error) {
	at := s.now()
	now, later := s.dialect.EncodeTime(at), s.dialect.EncodeTime(at.Add(time.Microsecond))
	hash := encodeHash(m.Hash)
	if _, err := ex.ExecContext(ctx, s.q.touch, m.Source, m.MessageID, m.Topic, encodeBytes(m.Payload), hash,
		now, now, now, now, later, hash); err != nil {
		return inboxrow.Touch{}, opErr("touch", err)
	}
	t, err := s.readTouch(ctx, ex, m.Key())
	if err != nil {
		return inboxrow.Touch{}, opErr("touch", err)
	}
	t.HashMismatch = len(m.Hash) > 0 && len(t.Hash) > 0 && !bytes.Equal(m.Hash, t.Hash)
	return t, nil
}

func (s *inboxStore) readTouch(ctx context.Context, ex inboxrow.Tx, k inboxrow.Key) (inboxrow.Touch, error) {
	rows, err := ex.QueryContext(ctx, s.q.touchRead, k.Source, k.MessageID)
	if err != nil {
		return inboxrow.Touch{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return inboxrow.Touch{}, err
		}
		return inboxrow.Touch{}, errors.New("row vanished after the upsert")
	}
	var status, attempt, hash, lockedBy, lockedUntil, lastSeen any
	if err := rows.Scan(&status, &attempt, &hash, &lockedBy, &lockedUntil, &lastSeen); err != nil {
		return inboxrow.Touch{}, err
	}
	var t inboxrow.Touch
	st, err1 := asInt(status)
	at, err2 := asInt(attempt)
	h, err3 := asBytes(hash)
	by, err4 := asString(lockedBy)
	until, err5 := s.dialect.DecodeTime(lockedUntil)
	seen, err6 := s.dialect.DecodeTime(lastSeen)
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return inboxrow.Touch{}, err
	}
	t.Status, t.Attempt, t.Hash, t.LockedBy, t.LockedUntil, t.LastSeenAt = inboxrow.Status(st), int(at), h, by, until, seen
	return t, rows.Close()
}

// MarkDoneTx sets the message Done with last_seen_at = now and releases
// any lease, on ex (the transaction that ran Touch and the business
// writes); touched is the Touch's LastSeenAt.
//
// The update is fenced on touched, a time the row did not hold before the
// transaction: if the database rolled the transaction back on its own
// (MySQL/MariaDB after a deadlock or a lock wait timeout, SQLite after
// some I/O errors) and the business code ignored the failed statement, ex
// now runs in autocommit mode, and an unfenced update would mark the
// message Done for good with its effect never committed. The fenced one
// changes nothing and an error wrapping core.ErrTxAborted is returned.
//
// On a database that may roll back silently, when ex can run checks
// before its commit (core.CommitChecker, as txctx's transactions), one is
// registered too, for the first message marked on ex: a rollback after
// the mark (a later statement the business code ignored) makes the commit
// fail with core.ErrTxAborted instead of succeeding on nothing.
func (s *inboxStore) MarkDoneTx(ctx context.Context, ex inboxrow.Tx, k inboxrow.Key, touched time.Time) error {
	n, err := execCount(ctx, ex, s.q.markDone, s.dialect.EncodeTime(s.now()), k.Source, k.MessageID, s.dialect.EncodeTime(touched))
	switch {
	case err != nil:
		return opErr("mark done", err)
	case n != 1: // the status changes, so MySQL's changed rows count it
		return opErr("mark done", fmt.Errorf("the row of (source %q, message id %q) no longer holds this transaction's delivery: %w",
			k.Source, k.MessageID, core.ErrTxAborted))
	}
	s.checkDoneBeforeCommit(ex, k)
	return nil
}

// checkDoneBeforeCommit registers, on a database that may roll back
// silently and a transaction that can check before its commit, a check
// that the message k the transaction marked Done is still Done. One check
// per transaction: every later mark ran in the transaction too if the
// first one is still there.
func (s *inboxStore) checkDoneBeforeCommit(ex inboxrow.Tx, k inboxrow.Key) {
	if !s.dialect.Capabilities().SilentRollback {
		return
	}
	cc, ok := ex.(core.CommitChecker)
	if !ok {
		return
	}
	cc.BeforeCommit(s, func(ctx context.Context) error {
		if w, ok := ex.(core.StatementWatcher); ok && !w.MayHaveFailed() {
			return nil // no statement failed: the server cannot have rolled back
		}
		rows, err := ex.QueryContext(ctx, s.q.doneCheck, k.Source, k.MessageID)
		if err != nil {
			return opErr("check before commit", err)
		}
		found := rows.Next()
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return opErr("check before commit", err)
		}
		if !found {
			// As the outbox's check: a rollback to a savepoint of a
			// transaction still open undid the mark (and the business
			// writes with it); the message is processed again when it
			// comes again.
			if q, ok := ex.(rowQuerier); ok && s.shell.undoneBySavepoint(ctx, ex, q) {
				return nil
			}
			return opErr("check before commit", fmt.Errorf("(source %q, message id %q) is no longer Done in %s: %w",
				k.Source, k.MessageID, s.table, core.ErrTxAborted))
		}
		return nil
	})
}

// AlreadyProcessed is Touch in a transaction of its own: a new key is inserted as Seen; the returned state tells
// whether it is Done.
func (s *inboxStore) AlreadyProcessed(ctx context.Context, k inboxrow.Key, hash []byte) (inboxrow.Touch, error) {
	var t inboxrow.Touch
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		t, err = s.Touch(ctx, tx, inboxrow.Message{Source: k.Source, MessageID: k.MessageID, Hash: hash})
		return err
	})
	return t, err
}

// MarkProcessed sets the message Done (inserting it as Done when it is
// unknown) and releases any lease. It is idempotent.
func (s *inboxStore) MarkProcessed(ctx context.Context, k inboxrow.Key) error {
	now := s.dialect.EncodeTime(s.now())
	if _, err := s.exec(ctx, s.q.markProcessed, k.Source, k.MessageID, []byte{}, now, now, now, now); err != nil {
		return opErr("mark processed", err)
	}
	return nil
}

// maxEnqueueTries bounds the insert races of Enqueue: a concurrent first
// enqueue of the same key makes the insert fail as a duplicate, and the
// next try finds the row.
const maxEnqueueTries = 3

// Enqueue stores m for the work queue, in one
// transaction:
//
//   - a new key is inserted as Processing, attempt 0, first and last seen
//     now, claimable now or at m.DueAt;
//   - a Done row only gets last_seen_at = now (it is never processed
//     again);
//   - a Seen row (from a deduplication check) becomes Processing,
//     claimable now, with m's topic, payload, hash and due time;
//   - a Processing or Dead row gets m's topic, payload, hash and due time
//     and last_seen_at = now, and keeps its status, attempt, lease and
//     next attempt (a Dead message is not revived by a redelivery).
//
// The existing row is read with a locking read in a READ COMMITTED
// transaction where rows lock, so a concurrent enqueue of the same key
// waits; two concurrent first enqueues meet on the primary key, and the
// loser tries again and finds the row.
func (s *inboxStore) Enqueue(ctx context.Context, m inboxrow.Message) (inboxrow.EnqueueResult, error) {
	var (
		res inboxrow.EnqueueResult
		err error
	)
	for try := 1; ; try++ {
		res = inboxrow.EnqueueResult{}
		err = s.inTx(ctx, func(tx *sqlx.Tx) error { return s.enqueueTx(ctx, tx, m, &res) })
		if err == nil || try == maxEnqueueTries || s.dialect.Classify(err) != ClassDuplicate {
			break
		}
	}
	if err != nil {
		return inboxrow.EnqueueResult{}, opErr("enqueue", err)
	}
	return res, nil
}

func (s *inboxStore) enqueueTx(ctx context.Context, tx *sqlx.Tx, m inboxrow.Message, res *inboxrow.EnqueueResult) error {
	now := s.now()
	at := s.dialect.EncodeTime(now)
	rows, err := tx.QueryContext(ctx, s.q.enqueueRead, m.Source, m.MessageID)
	if err != nil {
		return err
	}
	found := rows.Next()
	var status, hash any
	if found {
		err = rows.Scan(&status, &hash)
	}
	err = errors.Join(err, rows.Err(), rows.Close())
	if err != nil {
		return err
	}
	payload, newHash, due := encodeBytes(m.Payload), encodeHash(m.Hash), s.encodeDue(m.DueAt)
	if !found {
		_, err := tx.ExecContext(ctx, s.q.enqueueInsert, m.Source, m.MessageID, m.Topic, payload, newHash, at, at, at, due)
		res.Inserted, res.Status = true, inboxrow.Processing
		return err
	}
	st, err1 := asInt(status)
	old, err2 := asBytes(hash)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	res.Previous, res.Status = inboxrow.Status(st), inboxrow.Status(st)
	res.HashMismatch = len(m.Hash) > 0 && len(old) > 0 && !bytes.Equal(m.Hash, old)
	switch res.Previous {
	case inboxrow.Done:
		_, err = tx.ExecContext(ctx, s.q.enqueueTouch, at, m.Source, m.MessageID)
	case inboxrow.Seen:
		res.Status = inboxrow.Processing
		_, err = tx.ExecContext(ctx, s.q.enqueuePromote, m.Topic, payload, newHash, due, at, at, m.Source, m.MessageID)
	default:
		_, err = tx.ExecContext(ctx, s.q.enqueueUpdate, m.Topic, payload, newHash, due, at, m.Source, m.MessageID)
	}
	return err
}

// Get returns the stored message with key k, or an error wrapping
// [core.ErrNotFound]. Undecodable columns are reported in
// Record.DecodeErr.
func (s *inboxStore) Get(ctx context.Context, k inboxrow.Key) (inboxrow.Record, error) {
	recs, err := retryBusy(ctx, s.shell, func() ([]inboxrow.Record, error) {
		return s.scanInbox(ctx, s.db, 1, s.q.get, k.Source, k.MessageID)
	})
	if err != nil {
		return inboxrow.Record{}, opErr("get", err)
	}
	if len(recs) == 0 {
		return inboxrow.Record{}, opErr("get", core.ErrNotFound)
	}
	return recs[0], nil
}

// scanInbox runs a query returning inboxColumns on q once.
func (s *inboxStore) scanInbox(ctx context.Context, q queryer, sizeHint int, query string, args ...any) ([]inboxrow.Record, error) {
	return scanRows(ctx, q, len(inboxColumns), sizeHint, s.decodeInbox, query, args...)
}

// decodeInbox turns the raw values of one row (inboxColumns order) into a
// record; column problems go to DecodeErr.
func (s *inboxStore) decodeInbox(v []any) inboxrow.Record {
	var r inboxrow.Record
	c := &columns{d: s.dialect, names: inboxColumns, v: v}
	c.str(0, &r.Source)
	c.str(1, &r.MessageID)
	c.str(2, &r.Topic)
	var err error
	r.Payload, err = asBytes(v[3])
	c.fail(3, err)
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	r.Hash, err = asBytes(v[4])
	c.fail(4, err)
	if len(r.Hash) == 0 {
		r.Hash = nil
	}
	r.Status = inboxrow.Status(c.int(5))
	r.Attempt = int(c.int(6))
	c.time(7, &r.FirstSeenAt, true)
	c.time(8, &r.LastSeenAt, true)
	c.time(9, &r.NextAttemptAt, true)
	c.time(10, &r.DueAt, false)
	c.str(11, &r.LockedBy)
	c.time(12, &r.LockedUntil, false)
	c.str(13, &r.LastError)
	r.DecodeErr = c.err()
	return r
}

// asBytes reads a BLOB column: NULL is nil. (database/sql already copies
// the bytes it scans into an *any.)
func asBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	}
	return nil, fmt.Errorf("stored value is %T, want bytes", v)
}
