package jdbcstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ctxerr"
	"github.com/outbox-go/outbox/internal/inboxrow"
)

// checkOwner is the store's own guard on owner tokens (package inbox
// reports a typed error first).
func checkOwner(owner string) error {
	if owner == "" || len(owner) > core.MaxOwnerLen {
		return &core.ConfigError{Field: "owner", Msg: fmt.Sprintf("must be 1 to %d bytes", core.MaxOwnerLen)}
	}
	return nil
}

// Claim leases up to limit claimable messages to owner for lease, charges
// each an attempt (the returned Attempt counts this claim) and returns
// them, earliest next attempt first. A
// message is claimable when it is Processing, its next attempt and its due
// time (if any) are not in the future, and it has no lease or an expired
// one. A message leased by owner itself is not claimed again while the
// lease runs; once it expired, a new claim writes a later expiry, which
// tells the two claims apart (see inboxrow.Lease).
//
// As [Store.ClaimDue]: SQLite runs one UPDATE … RETURNING; MySQL/MariaDB
// select FOR UPDATE SKIP LOCKED and lease the rows in one short READ
// COMMITTED transaction, so concurrent claimers never get the same message
// and never wait for each other.
func (s *inboxStore) Claim(ctx context.Context, owner string, lease time.Duration, limit int) ([]inboxrow.Record, error) {
	if err := checkOwner(owner); err != nil {
		return nil, opErr("claim", err)
	}
	if limit <= 0 || lease <= 0 {
		return nil, opErr("claim", &core.ConfigError{Field: "lease/limit", Msg: "must be positive"})
	}
	now := s.now()
	until := now.Add(lease)
	d := s.dialect
	at := d.EncodeTime(now)
	claimable := []any{at, at, at}
	var (
		recs []inboxrow.Record
		err  error
	)
	switch caps := d.Capabilities(); {
	case caps.Returning:
		args := append([]any{owner, d.EncodeTime(until)}, claimable...)
		recs, err = retryBusy(ctx, s.shell, func() ([]inboxrow.Record, error) {
			return s.scanInbox(ctx, s.db, limit, s.q.claimReturning, append(args, limit)...)
		})
		slices.SortFunc(recs, func(a, b inboxrow.Record) int {
			return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), cmp.Compare(a.Source, b.Source), cmp.Compare(a.MessageID, b.MessageID))
		})
	case caps.SkipLocked:
		recs, err = retryBusy(ctx, s.shell, func() ([]inboxrow.Record, error) {
			return s.claimSkipLocked(ctx, owner, until, limit, append(claimable, limit))
		})
	default:
		return nil, opErr("claim", fmt.Errorf("dialect %s supports neither RETURNING nor SKIP LOCKED", d.Name()))
	}
	if err != nil {
		return nil, opErr("claim", err)
	}
	return recs, nil
}

func (s *inboxStore) claimSkipLocked(ctx context.Context, owner string, until time.Time, limit int, selectArgs []any) ([]inboxrow.Record, error) {
	tx, err := s.db.BeginTxx(ctx, s.txOptions())
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	recs, err := s.scanInbox(ctx, tx, limit, s.q.claimSelect, selectArgs...)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	keys := make([]inboxrow.Key, len(recs))
	for i, r := range recs {
		keys[i] = r.Key()
	}
	t := s.dialect.QuoteIdent(s.table)
	args := keyArgs([]any{owner, s.dialect.EncodeTime(until)}, keys)
	if _, err := tx.ExecContext(ctx, keyList(s.dialect, "UPDATE "+t+" SET "+claimSet+" WHERE ", len(keys), ""), args...); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, ctxerr.OfCommit(ctx, err)
	}
	until = until.UTC().Truncate(time.Microsecond)
	for i := range recs {
		recs[i].LockedBy, recs[i].LockedUntil = owner, until
		recs[i].Attempt++
	}
	return recs, nil
}

// fence returns the condition every lease-holder write ends with, and its
// arguments: l's claim holds the lease (the owner, and the expiry that
// claim wrote unless l.Until is zero) and the message is still Processing.
func (s *inboxStore) fence(l inboxrow.Lease) (string, []any) {
	if l.Until.IsZero() {
		return heldBy, []any{l.Owner}
	}
	return heldBy + " AND locked_until = ?", []any{l.Owner, s.dialect.EncodeTime(l.Until)}
}

// heldBy is the fence without the lease expiry.
var heldBy = " AND locked_by = ? AND status = " + strconv.Itoa(int(inboxrow.Processing))

// Ack sets the given messages Done, with last_seen_at = now (cleanup's
// retention counts from there), and releases their leases, for those
// that l holds. Unknown keys, keys held under another lease and
// duplicates are ignored. It returns how many changed.
func (s *inboxStore) Ack(ctx context.Context, l inboxrow.Lease, keys []inboxrow.Key) (int64, error) {
	if err := checkOwner(l.Owner); err != nil {
		return 0, opErr("ack", err)
	}
	prefix := "UPDATE " + s.dialect.QuoteIdent(s.table) + " SET status = " + strconv.Itoa(int(inboxrow.Done)) +
		", last_seen_at = ?, locked_by = NULL, locked_until = NULL WHERE "
	now := s.dialect.EncodeTime(s.now())
	fence, fenceArgs := s.fence(l)
	n, err := s.writeKeys(ctx, keys, false, func(ex inboxrow.Tx, ks []inboxrow.Key) (int64, error) {
		return execCount(ctx, ex, keyList(s.dialect, prefix, len(ks), fence), append(keyArgs([]any{now}, ks), fenceArgs...)...)
	})
	if err != nil {
		return 0, opErr("ack", err)
	}
	return n, nil
}

// Release hands back l's leases on the given messages and the attempt
// their claim charged, changing nothing else: they are claimable again at
// once (subject to their next attempt and due times). Messages l does not
// hold, or that are not Processing, are ignored. It returns how many
// changed. A dispatcher calls it for messages whose handler a shutdown
// interrupted.
func (s *inboxStore) Release(ctx context.Context, l inboxrow.Lease, keys []inboxrow.Key) (int64, error) {
	if err := checkOwner(l.Owner); err != nil {
		return 0, opErr("release", err)
	}
	// A row claimed by an earlier release of this library, whose claims
	// charged nothing, has nothing to give back: never below 0.
	prefix := "UPDATE " + s.dialect.QuoteIdent(s.table) +
		" SET locked_by = NULL, locked_until = NULL, attempt = CASE WHEN attempt > 0 THEN attempt - 1 ELSE 0 END WHERE "
	fence, fenceArgs := s.fence(l)
	n, err := s.writeKeys(ctx, keys, false, func(ex inboxrow.Tx, ks []inboxrow.Key) (int64, error) {
		return execCount(ctx, ex, keyList(s.dialect, prefix, len(ks), fence), append(keyArgs(nil, ks), fenceArgs...)...)
	})
	if err != nil {
		return 0, opErr("release", err)
	}
	return n, nil
}

// PutOff hands back l's leases on the given messages and the attempt
// their claim charged, as Release does, and makes them claimable again
// only after delay, recording lastError ("" stores NULL). Messages l does
// not hold are ignored. It returns how many changed. A dispatcher calls
// it for messages whose topic has no handler: no handler ran, so no
// attempt counts.
func (s *inboxStore) PutOff(ctx context.Context, l inboxrow.Lease, keys []inboxrow.Key, lastError string, delay time.Duration) (int64, error) {
	if err := checkOwner(l.Owner); err != nil {
		return 0, opErr("put off", err)
	}
	prefix := "UPDATE " + s.dialect.QuoteIdent(s.table) +
		" SET next_attempt_at = ?, last_error = ?, locked_by = NULL, locked_until = NULL," +
		" attempt = CASE WHEN attempt > 0 THEN attempt - 1 ELSE 0 END WHERE "
	fence, fenceArgs := s.fence(l)
	head := []any{s.dialect.EncodeTime(s.now().Add(max(0, delay))), s.nullError(lastError)}
	n, err := s.writeKeys(ctx, keys, false, func(ex inboxrow.Tx, ks []inboxrow.Key) (int64, error) {
		return execCount(ctx, ex, keyList(s.dialect, prefix, len(ks), fence), append(keyArgs(head, ks), fenceArgs...)...)
	})
	if err != nil {
		return 0, opErr("put off", err)
	}
	return n, nil
}

// Abandon releases l's leases on the given messages and makes them
// claimable again after delay(attempt), attempt being their attempt count
// (which their claim charged), recording lastError ("" stores NULL).
// Messages l does not hold are ignored. It returns how many changed.
//
// It runs in one transaction: the attempts are read with a locking read,
// and the messages are updated in one statement per distinct attempt count.
func (s *inboxStore) Abandon(ctx context.Context, l inboxrow.Lease, keys []inboxrow.Key, lastError string, delay func(attempt int) time.Duration) (int64, error) {
	if err := checkOwner(l.Owner); err != nil {
		return 0, opErr("abandon", err)
	}
	if delay == nil {
		return 0, opErr("abandon", &core.ConfigError{Field: "delay", Msg: "must not be nil"})
	}
	errArg := s.nullError(lastError)
	n, err := s.writeKeys(ctx, keys, true, func(ex inboxrow.Tx, ks []inboxrow.Key) (int64, error) {
		return s.abandonChunk(ctx, ex, l, ks, errArg, delay)
	})
	if err != nil {
		return 0, opErr("abandon", err)
	}
	return n, nil
}

// abandonChunk abandons one chunk of keys inside a transaction: a locking
// read of the attempts, then one UPDATE per distinct attempt count.
func (s *inboxStore) abandonChunk(ctx context.Context, ex inboxrow.Tx, l inboxrow.Lease, ks []inboxrow.Key, errArg any,
	delay func(attempt int) time.Duration) (int64, error) {
	t := s.dialect.QuoteIdent(s.table)
	fence, fenceArgs := s.fence(l)
	byAttempt := map[int][]inboxrow.Key{}
	rows, err := ex.QueryContext(ctx, keyList(s.dialect, "SELECT source, message_id, attempt FROM "+t+" WHERE ", len(ks), fence+lockingRead(s.dialect)),
		append(keyArgs(nil, ks), fenceArgs...)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var src, id, att any
		if err := rows.Scan(&src, &id, &att); err != nil {
			return 0, err
		}
		source, err1 := asString(src)
		msgID, err2 := asString(id)
		a, err3 := asInt(att)
		if err := errors.Join(err1, err2, err3); err != nil {
			return 0, err
		}
		byAttempt[int(a)] = append(byAttempt[int(a)], inboxrow.Key{Source: source, MessageID: msgID})
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	now := s.now()
	prefix := "UPDATE " + t + " SET next_attempt_at = ?, last_error = ?, locked_by = NULL, locked_until = NULL WHERE "
	var total int64
	for _, a := range slices.Sorted(maps.Keys(byAttempt)) {
		group := byAttempt[a]
		next := now.Add(max(0, delay(a)))
		n, err := execCount(ctx, ex, keyList(s.dialect, prefix, len(group), fence),
			append(keyArgs([]any{s.dialect.EncodeTime(next), errArg}, group), fenceArgs...)...)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// Fail sets the given messages Dead, records errMsg, sets last_seen_at =
// now and releases their leases, for those that l holds; the attempt
// their claim charged stays charged unless refund (a claim that ran no
// handler). It returns how many changed.
func (s *inboxStore) Fail(ctx context.Context, l inboxrow.Lease, keys []inboxrow.Key, errMsg string, refund bool) (int64, error) {
	if err := checkOwner(l.Owner); err != nil {
		return 0, opErr("fail", err)
	}
	prefix := "UPDATE " + s.dialect.QuoteIdent(s.table) + " SET status = " + strconv.Itoa(int(inboxrow.Dead)) +
		", last_error = ?, last_seen_at = ?, locked_by = NULL, locked_until = NULL WHERE "
	if refund {
		prefix = strings.Replace(prefix, " SET ", " SET attempt = CASE WHEN attempt > 0 THEN attempt - 1 ELSE 0 END, ", 1)
	}
	errArg := s.nullError(errMsg)
	now := s.dialect.EncodeTime(s.now())
	fence, fenceArgs := s.fence(l)
	n, err := s.writeKeys(ctx, keys, false, func(ex inboxrow.Tx, ks []inboxrow.Key) (int64, error) {
		return execCount(ctx, ex, keyList(s.dialect, prefix, len(ks), fence), append(keyArgs([]any{errArg, now}, ks), fenceArgs...)...)
	})
	if err != nil {
		return 0, opErr("fail", err)
	}
	return n, nil
}

// ReapExpired releases up to limit expired leases of Processing messages
// and returns how many; the attempts their claims charged stay charged.
// Done and Dead messages hold no lease and are never touched.
func (s *inboxStore) ReapExpired(ctx context.Context, limit int) (int64, error) {
	if limit <= 0 {
		return 0, opErr("reap", &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be > 0, got %d", limit)})
	}
	n, err := s.execRC(ctx, s.q.reap, s.q.reapCleanupArgs(s.dialect.EncodeTime(s.now()), limit)...)
	if err != nil {
		return n, opErr("reap", err)
	}
	return n, nil
}

// Cleanup deletes Done messages whose last_seen_at (their last delivery
// or, if later, their completion) is more than olderThan ago, at most
// batch per statement, each statement on its own,
// until none is left. Seen, Processing and Dead messages are never
// deleted. It returns how many rows it deleted.
func (s *inboxStore) Cleanup(ctx context.Context, olderThan time.Duration, batch int) (int64, error) {
	if olderThan <= 0 || batch <= 0 {
		return 0, opErr("cleanup", &core.ConfigError{Field: "retention/batch", Msg: "must be positive"})
	}
	cutoff := s.dialect.EncodeTime(s.now().Add(-olderThan))
	var total int64
	for {
		n, err := s.execRC(ctx, s.q.cleanup, s.q.reapCleanupArgs(cutoff, batch)...)
		total += n
		if err != nil {
			return total, opErr("cleanup", err)
		}
		if n < int64(batch) {
			return total, nil
		}
	}
}
