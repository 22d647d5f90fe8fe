package core

import (
	"context"
	"fmt"
)

// Client publishes events inside business transactions (the spec's
// OutboxClient). It is safe for concurrent use.
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

// PublishTx is Publish with an explicit transaction.
func (c *Client) PublishTx(ctx context.Context, tx Tx, env Envelope) (string, error) {
	if tx == nil || !tx.Active() {
		return "", ErrNoTransaction
	}
	if err := env.Validate(); err != nil {
		return "", err
	}
	var lease Lease
	if c.hot != nil {
		lease = c.hot.HotLease(env)
	}
	if err := c.store.Insert(ctx, tx, env, lease); err != nil {
		return "", fmt.Errorf("outbox: publish %s: %w", env.id, err)
	}
	if c.hot != nil {
		hot := c.hot
		tx.AfterCommit(func() { hot.EnqueueHot(env, lease) })
	}
	return env.id, nil
}
