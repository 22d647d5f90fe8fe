package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/deadline"
	"github.com/outbox-go/outbox/jdbcstore"
)

// slots bounds the database reads and writes the dashboard runs at once,
// across every page load and database: however many operators load
// pages, the dashboard takes at most that many connections and that
// much database work from the application.
type slots chan struct{}

func (s slots) acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slots) release() { <-s }

// do runs fn in a slot.
func do[T any](ctx context.Context, s slots, fn func() (T, error)) (T, error) {
	if err := s.acquire(ctx); err != nil {
		var zero T
		return zero, fmt.Errorf("waiting for a free database slot (all %d in use): %w", cap(s), err)
	}
	defer s.release()
	return fn()
}

// errQueryTimeout is the cause of a context ended by Config.QueryTimeout.
var errQueryTimeout = errors.New("outbox: dashboard: query timeout")

// withQueryTimeout returns ctx bounded by the query timeout d.
func withQueryTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, errQueryTimeout)
}

// timeoutError is database work cut short by Config.QueryTimeout.
type timeoutError struct {
	after time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("not done within the query timeout (%s): %v", e.after, e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

// timedOut returns err, from work under ctx (bounded by
// withQueryTimeout with d), as a *timeoutError when ctx ended by its
// query timeout; other errors as they are.
func timedOut(ctx context.Context, d time.Duration, err error) error {
	if err == nil || errors.As(err, new(*timeoutError)) {
		return err
	}
	awaitDeadline(ctx, err)
	if !errors.Is(context.Cause(ctx), errQueryTimeout) {
		return err
	}
	return &timeoutError{after: d, err: err}
}

// deadlineSlack is how far ahead of ctx's deadline a timeout of the
// driver's may come: a dial or a read given ctx's deadline may time out
// a moment before ctx's own timer ends ctx.
const deadlineSlack = 100 * time.Millisecond

// awaitDeadline waits for ctx to end when err is a timeout that came just
// before ctx's deadline, so that ctx's cause tells what it was.
func awaitDeadline(ctx context.Context, err error) {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		deadline.Settle(ctx, deadlineSlack)
	}
}

// limitedStore is a Store whose every call takes a slot.
type limitedStore struct {
	st Store
	s  slots
}

func (l limitedStore) StatsWith(ctx context.Context, o jdbcstore.StatsOptions) (jdbcstore.Stats, error) {
	return do(ctx, l.s, func() (jdbcstore.Stats, error) { return l.st.StatsWith(ctx, o) })
}

func (l limitedStore) DeadTypes(ctx context.Context, offset, limit int) ([]jdbcstore.DeadTypeCount, error) {
	return do(ctx, l.s, func() ([]jdbcstore.DeadTypeCount, error) { return l.st.DeadTypes(ctx, offset, limit) })
}

func (l limitedStore) Activity(ctx context.Context, buckets int, width time.Duration) ([]jdbcstore.ActivityBucket, error) {
	return do(ctx, l.s, func() ([]jdbcstore.ActivityBucket, error) { return l.st.Activity(ctx, buckets, width) })
}

func (l limitedStore) BlockedKeys(ctx context.Context, limit int) ([]jdbcstore.BlockedKey, error) {
	return do(ctx, l.s, func() ([]jdbcstore.BlockedKey, error) { return l.st.BlockedKeys(ctx, limit) })
}

func (l limitedStore) ListDeadSummaries(ctx context.Context, f jdbcstore.DeadFilter, after string, limit int) ([]jdbcstore.DeadSummary, error) {
	return do(ctx, l.s, func() ([]jdbcstore.DeadSummary, error) { return l.st.ListDeadSummaries(ctx, f, after, limit) })
}

func (l limitedStore) Get(ctx context.Context, id string) (core.Record, error) {
	return do(ctx, l.s, func() (core.Record, error) { return l.st.Get(ctx, id) })
}

func (l limitedStore) ReplayDead(ctx context.Context, f jdbcstore.DeadFilter, o jdbcstore.ReplayOptions) (jdbcstore.ReplayResult, error) {
	return do(ctx, l.s, func() (jdbcstore.ReplayResult, error) { return l.st.ReplayDead(ctx, f, o) })
}

func (l limitedStore) Purge(ctx context.Context, o jdbcstore.PurgeOptions) (jdbcstore.PurgeResult, error) {
	return do(ctx, l.s, func() (jdbcstore.PurgeResult, error) { return l.st.Purge(ctx, o) })
}

// limitedInbox is an Inbox whose every call takes a slot.
type limitedInbox struct {
	in Inbox
	s  slots
}

func (l limitedInbox) CountByStatus(ctx context.Context) (map[inbox.Status]int, error) {
	return do(ctx, l.s, func() (map[inbox.Status]int, error) { return l.in.CountByStatus(ctx) })
}

func (l limitedInbox) ListPreview(ctx context.Context, status inbox.Status, after inbox.Key, limit, previewBytes int) ([]inbox.Record, error) {
	return do(ctx, l.s, func() ([]inbox.Record, error) { return l.in.ListPreview(ctx, status, after, limit, previewBytes) })
}
