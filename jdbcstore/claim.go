package jdbcstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// ClaimDue leases up to req.Limit due NEW/RETRY rows to req.Owner until
// req.LeaseUntil and returns them, oldest due first (available_at,
// created_at, event_id). A row is claimable when it was created at least
// req.SkipRecent before req.Now and is unowned, owned by req.Owner, or
// leased by another owner whose lease ended before req.Now.
//
// The claim is atomic per database: SQLite runs one UPDATE … RETURNING
// (SQLite allows one writer at a time); PostgreSQL runs one UPDATE …
// RETURNING whose subquery selects the rows FOR UPDATE SKIP LOCKED;
// MySQL/MariaDB select the rows FOR
// UPDATE SKIP LOCKED in a short READ COMMITTED transaction and lease them
// before commit, so concurrent claimers on other nodes never get the same
// row and never wait for each other.
func (s *Store) ClaimDue(ctx context.Context, req core.ClaimRequest) ([]core.Record, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := validOwner(req.Owner); err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: claim: %w", err)
	}
	if req.Limit <= 0 {
		return nil, &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be > 0, got %d", req.Limit)}
	}
	if req.SkipRecent < 0 {
		return nil, &core.ConfigError{Field: "skipRecent", Msg: fmt.Sprintf("must not be negative, got %s", req.SkipRecent)}
	}
	if !req.LeaseUntil.After(req.Now) {
		return nil, &core.ConfigError{Field: "leaseUntil", Msg: "must be after now"}
	}
	s.checkKeyIDs(ctx)
	d := s.dialect
	now := d.EncodeTime(req.Now)
	own := req.Owner
	if req.SkipOwn {
		own = "" // no lease is held by the empty owner: only unowned or expired rows
	}
	claimable := []any{now, d.EncodeTime(req.Now.Add(-req.SkipRecent)), now, own}
	var (
		recs []core.Record
		err  error
	)
	switch caps := d.Capabilities(); {
	case caps.Returning:
		args := append([]any{req.Owner, d.EncodeTime(req.LeaseUntil)}, claimable...)
		if s.q.claimPerStatus {
			args = append(append(append(args, req.Limit), claimable...), req.Limit)
		}
		s.checkPins(ctx)
		gctx, release, gerr := s.gate.Acquire(ctx)
		if gerr != nil {
			return nil, fmt.Errorf("outbox: jdbcstore: claim: %w", gerr)
		}
		stmt := s.q.claimReturning
		if s.pinPending.Load() && !s.q.claimPerStatus {
			stmt = s.q.claimPinned
		}
		recs, err = s.queryRecords(gctx, req.Limit, stmt, append(args, req.Limit)...)
		release()
		sortClaim(recs) // RETURNING gives no order: restore the claim order
	case caps.SkipLocked:
		recs, err = retryBusy(ctx, s, func() ([]core.Record, error) {
			return s.claimSkipLocked(ctx, req, append(claimable, req.Limit))
		})
	default:
		return nil, fmt.Errorf("outbox: jdbcstore: claim: dialect %s supports neither RETURNING nor SKIP LOCKED", d.Name())
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: jdbcstore: claim: %w", err)
	}
	return recs, nil
}

// sortClaim sorts records in claim order: available_at, created_at,
// event_id.
func sortClaim(recs []core.Record) {
	slices.SortFunc(recs, func(a, b core.Record) int {
		return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}

// claimSkipLocked selects claimable rows FOR UPDATE SKIP LOCKED and leases
// them in one short transaction.
func (s *Store) claimSkipLocked(ctx context.Context, req core.ClaimRequest, selectArgs []any) ([]core.Record, error) {
	return s.claimLocked(ctx, req.Owner, req.LeaseUntil, func(tx *sqlx.Tx) ([]core.Record, error) {
		recs, err := scanRecords(ctx, s, tx, req.Limit, s.q.claimSelect, selectArgs...)
		if err != nil || s.q.claimSelectRetry == "" {
			return recs, err
		}
		// The RETRY rows' head, then the claim's first rows of both
		// heads. RETRY rows read but cut stay locked until the commit
		// (a few milliseconds), other claimers skip them meanwhile.
		retry, err := scanRecords(ctx, s, tx, req.Limit, s.q.claimSelectRetry, selectArgs...)
		if err != nil || len(retry) == 0 {
			return recs, err
		}
		recs = append(recs, retry...)
		sortClaim(recs)
		return recs[:min(len(recs), req.Limit)], nil
	})
}

// ReapExpired releases up to limit expired leases of NEW/RETRY rows
// (locked_by and locked_until back to NULL) and returns how many.
func (s *Store) ReapExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	if ctx == nil {
		return 0, core.ErrNilContext
	}
	if limit <= 0 {
		return 0, &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be > 0, got %d", limit)}
	}
	at := s.dialect.EncodeTime(now)
	if s.q.reapPick != "" {
		n, err := s.reapUnlocked(ctx, at, limit)
		if err != nil {
			return 0, s.mapError("reap", "", err)
		}
		return n, nil
	}
	if s.q.reapNowTwice {
		return s.exec(ctx, "reap", "", s.q.reap, at, at, limit)
	}
	return s.exec(ctx, "reap", "", s.q.reap, at, limit)
}

// reapUnlocked releases expired leases where rows lock (MySQL/MariaDB,
// PostgreSQL) in a short READ COMMITTED transaction: it picks the rows
// with FOR UPDATE SKIP LOCKED, then updates them by id. A row a business
// transaction holds (the event before an ordered one it published, read
// under a shared lock) is left for the next round: an UPDATE over the
// range kept the rows it had changed locked while it waited for that one,
// and a transaction publishing on several keys, waiting in turn for one
// of those, deadlocked with it (MariaDB rolled the business transaction
// back, Error 1213).
func (s *Store) reapUnlocked(ctx context.Context, at any, limit int) (int64, error) {
	var n int64
	err := retryTx(ctx, s, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sqlx.Tx) error {
		picked, err := queryIDs(ctx, tx, s.q.reapPick, limit, at, limit)
		if err != nil || len(picked) == 0 {
			n = 0
			return err
		}
		ids := slices.Collect(maps.Keys(picked))
		n, err = s.execByIDs(ids, nil, []any{at}, func(page []string, args []any) (int64, error) {
			return execCount(ctx, tx, inList(s.dialect, s.q.reapByIDPrefix, len(page), s.q.reapByIDSuffix), args...)
		})
		return err
	})
	return n, err
}
