package jdbcstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/ctxerr"
)

// Bounds of the lock-contention retry of the store's own statements.
const (
	busyRetryMinDelay = time.Millisecond
	busyRetryMaxDelay = 50 * time.Millisecond
)

// retryBusy runs fn until it returns anything but lock contention (as the
// dialect classifies it) or ctx ends. Waits grow from 1 ms to 50 ms with
// jitter. Only statements that run alone in autocommit mode may be
// retried: inside a transaction a failed statement can leave the
// transaction unusable.
//
// When ctx ends during the retries, the error wraps both the last
// contention error and the context's error.
func retryBusy[T any](ctx context.Context, s *Store, fn func() (T, error)) (T, error) {
	return retryBusyPaced(ctx, s, busyRetryMinDelay, busyRetryMaxDelay, fn)
}

// retryBusyPaced is retryBusy with waits growing from minDelay to
// maxDelay (each with jitter: half of it to all of it).
func retryBusyPaced[T any](ctx context.Context, s *Store, minDelay, maxDelay time.Duration, fn func() (T, error)) (T, error) {
	delay := minDelay
	var lastBusy error
	for attempt := 1; ; attempt++ {
		v, err := fn()
		if err == nil {
			return v, nil
		}
		if s.dialect.Classify(err) != ClassBusy {
			if lastBusy != nil && ctx.Err() != nil {
				// The context ended between two attempts: the statement
				// failed with ctx's error, which the driver gives without
				// ctx's cause.
				if errors.Is(err, ctx.Err()) {
					err = ctxerr.Of(ctx)
				}
				return v, giveUp(lastBusy, attempt-1, err)
			}
			return v, err
		}
		lastBusy = err
		if ctx.Err() != nil {
			return v, giveUp(err, attempt, ctxerr.Of(ctx))
		}
		if s.busyHook != nil {
			s.busyHook(attempt, err)
		}
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, giveUp(err, attempt, ctxerr.Of(ctx))
		case <-t.C:
		}
		delay = min(delay*2, maxDelay)
	}
}

// giveUp reports a contention error that outlived its context.
func giveUp(busy error, attempts int, cause error) error {
	return fmt.Errorf("%w (gave up after %d attempts: %w)", busy, attempts, cause)
}

// retryTx runs fn in a transaction of s's database begun with opts,
// committed when fn returns nil, and run again as a whole (fn must start
// afresh) while the database reports lock contention, until ctx ends.
func retryTx(ctx context.Context, s *Store, opts *sql.TxOptions, fn func(tx *sqlx.Tx) error) error {
	_, err := retryBusy(ctx, s, func() (struct{}, error) {
		tx, err := s.db.BeginTxx(ctx, opts)
		if err != nil {
			return struct{}{}, err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if err := fn(tx); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, ctxerr.OfCommit(ctx, tx.Commit())
	})
	return err
}

// execCommitted runs one write in a READ COMMITTED transaction of its
// own, run again as a whole while the database reports lock contention,
// and returns the number of rows it changed. It is for a write that
// scans rows others may hold locked but changes only some of them (see
// Store.execRC): under InnoDB's REPEATABLE READ such a statement locks
// every row and gap it reads until it ends, and waits for a row a
// business transaction holds even when it would not change it; under
// READ COMMITTED it takes no gap lock and judges a locked row by its last
// committed version, waiting only for rows it changes.
func execCommitted(ctx context.Context, s *Store, query string, args ...any) (int64, error) {
	var n int64
	err := retryTx(ctx, s, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
