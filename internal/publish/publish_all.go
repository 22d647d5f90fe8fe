package publish

import (
	"context"
	"fmt"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/txend"
)

// PublishAll is Publish for several events on the transaction carried by
// ctx: see PublishAllTx.
func (c *Client) PublishAll(ctx context.Context, envs ...core.Envelope) ([]string, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	tx, ok := core.TxFromContext(ctx)
	if !ok {
		return nil, c.refused(ctx, core.ErrNoTransaction, envs...)
	}
	return c.PublishAllTx(ctx, tx, envs...)
}

// PublishAllTx is PublishTx for several events, which it inserts in as
// few statements as the store can (core.BatchInserter; one by one on tx
// otherwise) and, once tx commits, hands to the hot queue as PublishTx
// would each of them. It returns their ids in the order of envs.
//
// Every envelope is checked first, as PublishTx checks one (validation,
// the ordering (SetOrdering), an ordered event on a store that cannot keep order, the
// Observer's headers), and so are duplicate ids within envs: the first
// bad one fails the call with a *core.BatchError naming it, before
// anything is written. No envelope is not an error: nothing is written
// and the ids are empty. A nil or finished tx returns
// core.ErrNoTransaction (a finished plain transaction at the insert, see
// PublishTx).
//
// An error of the insert (a *core.BatchError when it is one event's) may
// leave some of the events on tx, unless the store guarantees otherwise
// (jdbcstore takes the batch back after a duplicate id): roll tx back.
func (c *Client) PublishAllTx(ctx context.Context, tx core.Execer, envs ...core.Envelope) (ids []string, err error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if isNil(tx) {
		return nil, c.refused(ctx, core.ErrNoTransaction, envs...)
	}
	hooked, ok := tx.(core.Tx)
	if ok && !hooked.Active() {
		return nil, c.refused(ctx, core.ErrNoTransaction, envs...)
	}
	if len(envs) == 0 {
		return []string{}, nil
	}
	batch, err := c.checkAll(envs)
	if err != nil {
		return nil, c.refused(ctx, err, envs...)
	}
	if c.Observer != nil {
		dones := make([]func(error), 0, len(batch))
		defer func() {
			for _, done := range dones {
				done(err)
			}
		}()
		var refused error // the first event whose headers failed
		for i, env := range batch {
			headers, done := c.observe(ctx, env)
			dones = append(dones, done) // every event reported, also after a failure
			if refused != nil {
				continue
			}
			traced, herr := env.WithHeaders(headers)
			if herr != nil {
				refused = fmt.Errorf("outbox: publish all: %w",
					&core.BatchError{Index: i, ID: env.ID(), Err: fmt.Errorf("the observer's headers: %w", herr)})
				continue
			}
			batch[i] = traced
		}
		if refused != nil {
			return nil, refused
		}
	}
	hot := c.hot
	if !ok || (hot != nil && !c.hotSafe(hooked)) {
		hot = nil // inserted unowned: the poller delivers them
	}
	leases := make([]core.Lease, len(batch))
	if hot != nil {
		for i, env := range batch {
			leases[i] = hot.HotLease(env)
		}
	}
	var leased []bool
	if bi, isBatch := c.store.(core.BatchInserter); isBatch {
		leased, err = bi.InsertBatch(ctx, tx, batch, leases)
	} else {
		leased, err = c.insertEach(ctx, tx, batch, leases)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: publish all: %w", txend.Mark(err))
	}
	ids = make([]string, len(batch))
	for i, env := range batch {
		ids[i] = env.ID()
	}
	if !ok {
		return ids, nil
	}
	token := c.mark(hooked, ids...)
	if hot != nil {
		// As PublishTx: an ordered event behind a pending one of its key
		// is left to a poller, which delivers it in turn.
		hooked.AfterCommit(func() {
			left, known := c.leftOut(ctx, hot, hooked, ids, token)
			if !known {
				return
			}
			for i, env := range batch {
				if !left[env.ID()] && (env.OrderKey() == "" || leased[i]) {
					hot.EnqueueHot(env, leases[i])
				}
			}
		})
	}
	return ids, nil
}

// checkAll validates envs and applies Order, as PublishTx does for one
// event, refuses two events with one id, and returns the events to
// insert (a new slice: envs is not changed).
func (c *Client) checkAll(envs []core.Envelope) ([]core.Envelope, error) {
	batch := make([]core.Envelope, len(envs))
	seen := make(map[string]int, len(envs))
	_, orders := c.store.(core.OrderedInserter)
	for i, env := range envs {
		fail := func(err error) ([]core.Envelope, error) {
			return nil, fmt.Errorf("outbox: publish all: %w", &core.BatchError{Index: i, ID: env.ID(), Err: err})
		}
		if err := env.Validate(); err != nil {
			return fail(err)
		}
		env, err := c.applyOrder(env)
		if err != nil {
			return fail(err)
		}
		if env.OrderKey() != "" && !orders {
			return fail(fmt.Errorf("%w: the store does not keep events in order", core.ErrOrderingUnsupported))
		}
		if j, dup := seen[env.ID()]; dup {
			return fail(fmt.Errorf("%w: event %d of the batch has the same id", core.ErrDuplicateEvent, j))
		}
		seen[env.ID()] = i
		batch[i] = env
	}
	return batch, nil
}

// insertEach inserts the events one by one on tx, for a store that is
// not a core.BatchInserter, and reports which took their lease.
func (c *Client) insertEach(ctx context.Context, tx core.Execer, batch []core.Envelope, leases []core.Lease) ([]bool, error) {
	leased := make([]bool, len(batch))
	for i, env := range batch {
		var err error
		if env.OrderKey() != "" {
			leased[i], err = c.store.(core.OrderedInserter).InsertOrdered(ctx, tx, env, leases[i])
		} else {
			err = c.store.Insert(ctx, tx, env, leases[i])
			leased[i] = err == nil
		}
		if err != nil {
			return nil, &core.BatchError{Index: i, ID: env.ID(), Err: err}
		}
	}
	return leased, nil
}
