package core

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
)

// Client publishes events inside business transactions: the event row
// commits or rolls back with the caller's writes. It is safe for concurrent use.
type Client struct {
	store Inserter
	hot   HotQueue
}

// NewClient returns a Client that inserts through store and, after commit,
// hands events to hot, which also leases them to its node from the insert
// on. hot may be nil: events are then inserted unowned and wait for a poller.
func NewClient(store Inserter, hot HotQueue) (*Client, error) {
	if store == nil {
		return nil, &ConfigError{Field: "store", Msg: "must not be nil"}
	}
	return &Client{store: store, hot: hot}, nil
}

// Publish validates env, inserts it with status NEW on the transaction
// carried by ctx and, once that transaction commits, hands it to the hot
// queue. It returns the event id. Without an active transaction in ctx it
// returns ErrNoTransaction and writes nothing. A full hot queue is not an
// error: the row stays NEW and the poller delivers it.
func (c *Client) Publish(ctx context.Context, env Envelope) (string, error) {
	tx, ok := TxFromContext(ctx)
	if !ok {
		return "", ErrNoTransaction
	}
	return c.PublishTx(ctx, tx, env)
}

// hotSafe reports whether tx's after-commit hook may hand events to the
// hot path: always, unless the store's database can roll back silently and
// tx cannot check before it commits (see CommitChecker).
func (c *Client) hotSafe(tx Tx) bool {
	if sr, ok := c.store.(SilentRollbacker); !ok || !sr.SilentRollback() {
		return true
	}
	_, checks := tx.(CommitChecker)
	_, queries := tx.(rowQuerier)
	return checks && queries
}

// rowQuerier runs a query returning at most one row on a transaction; the
// SQL store's check before commit needs it.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// PublishTx is Publish with an explicit transaction. tx must be a
// transaction, not a database handle: a [Tx] (txctx's) gets the hot path
// as in Publish; any other transaction, such as a plain *sql.Tx or
// *sqlx.Tx, has no after-commit hook, so the event is inserted unowned
// and a poller delivers it once it is committed. A nil tx returns
// [ErrNoTransaction]. A transaction of another database than the store's
// is refused with [ErrForeignTx] when it tells its database
// ([TxDatabase]); nothing is written.
func (c *Client) PublishTx(ctx context.Context, tx Execer, env Envelope) (string, error) {
	if isNil(tx) {
		return "", ErrNoTransaction
	}
	hooked, ok := tx.(Tx)
	if ok && !hooked.Active() {
		return "", ErrNoTransaction
	}
	if err := env.Validate(); err != nil {
		return "", err
	}
	hot := c.hot
	if !ok || (hot != nil && !c.hotSafe(hooked)) {
		hot = nil // inserted unowned: the poller delivers it
	}
	var lease Lease
	if hot != nil {
		lease = hot.HotLease(env)
	}
	if err := c.store.Insert(ctx, tx, env, lease); err != nil {
		return "", fmt.Errorf("outbox: publish %s: %w", env.id, err)
	}
	if hot != nil {
		hooked.AfterCommit(func() { hot.EnqueueHot(env, lease) })
	}
	return env.id, nil
}

// isNil reports whether ex is nil or a nil pointer (a nil *sql.Tx passed
// as an Execer).
func isNil(ex Execer) bool {
	if ex == nil {
		return true
	}
	v := reflect.ValueOf(ex)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
