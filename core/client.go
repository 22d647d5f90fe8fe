package core

import (
	"context"
	"database/sql"
	"fmt"
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

// PublishTx is Publish with an explicit transaction. A transaction of
// another database than the store's is refused with [ErrForeignTx] when
// it tells its database ([TxDatabase]); nothing is written.
func (c *Client) PublishTx(ctx context.Context, tx Tx, env Envelope) (string, error) {
	if tx == nil || !tx.Active() {
		return "", ErrNoTransaction
	}
	if err := env.Validate(); err != nil {
		return "", err
	}
	hot := c.hot
	if hot != nil && !c.hotSafe(tx) {
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
		tx.AfterCommit(func() { hot.EnqueueHot(env, lease) })
	}
	return env.id, nil
}
