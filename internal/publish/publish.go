// Package publish is the publishing side of the outbox: it inserts an
// event on the caller's transaction and, once that commits, hands it to the
// dispatcher's hot queue. Package outbox and package tenant publish
// through it.
package publish

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/txend"
)

// Client publishes events inside business transactions: the event row
// commits or rolls back with the caller's writes. It is safe for concurrent use.
type Client struct {
	store core.Inserter
	hot   handoff.Hot
	// orderTypes are the Types of the ordering SetOrdering was given, as
	// a set (nil for none), orderAll whether "*" is one of them, matched
	// its policy for every type, which Apply takes at once.
	matched    core.Ordering
	orderTypes map[string]struct{}
	orderAll   bool
	// Observer, when set (before the first publish), sees every publish
	// and adds its headers (the trace context) to the event.
	Observer core.Observer

	// readsPausedUntil (nanoseconds after clockStart): until then a
	// hand-off after a savepoint rollback reads nothing (see gone).
	readsPausedUntil atomic.Int64
}

// New returns a Client that inserts through store and, after commit,
// hands events to hot, which also leases them to its node from the insert
// on. hot may be nil: events are then inserted unowned and wait for a poller.
func New(store core.Inserter, hot handoff.Hot) (*Client, error) {
	if store == nil {
		return nil, &core.ConfigError{Field: "store", Msg: "must not be nil"}
	}
	return &Client{store: store, hot: hot}, nil
}

// SetOrdering orders the events of o's types (call it before the first
// publish). Finding an event's type among them costs one map lookup,
// however many types o has.
func (c *Client) SetOrdering(o core.Ordering) {
	c.orderTypes, c.orderAll = nil, false
	c.matched = core.Ordering{Types: []string{"*"}, OnDead: o.OnDead}
	if len(o.Types) == 0 {
		return
	}
	c.orderTypes = make(map[string]struct{}, len(o.Types))
	for _, t := range o.Types {
		c.orderAll = c.orderAll || t == "*"
		c.orderTypes[t] = struct{}{}
	}
}

// applyOrder is Apply(env) of the ordering SetOrdering was given.
func (c *Client) applyOrder(env core.Envelope) (core.Envelope, error) {
	if c.orderTypes == nil {
		return env, nil
	}
	if _, ok := c.orderTypes[env.Type()]; !ok && !c.orderAll {
		return env, nil
	}
	return c.matched.Apply(env)
}

// Publish validates env, inserts it with status NEW on the transaction
// carried by ctx and, once that transaction commits, hands it to the hot
// queue. It returns the event id. Without an active transaction in ctx it
// returns ErrNoTransaction and writes nothing. A full hot queue is not an
// error: the row stays NEW and the poller delivers it.
func (c *Client) Publish(ctx context.Context, env core.Envelope) (string, error) {
	if ctx == nil {
		return "", core.ErrNilContext
	}
	tx, ok := core.TxFromContext(ctx)
	if !ok {
		return "", c.refused(ctx, core.ErrNoTransaction, env)
	}
	return c.PublishTx(ctx, tx, env)
}

// refused reports to the Observer, if any, the events of a Publish (or
// PublishAll) that failed before they were inserted, each with err, as
// it reports every Publish; it returns err.
func (c *Client) refused(ctx context.Context, err error, envs ...core.Envelope) error {
	if c.Observer != nil {
		for _, env := range envs {
			_, done := c.observe(ctx, env)
			done(err)
		}
	}
	return err
}

// observe reports a Publish of env to the Observer (set) and returns the
// headers it adds and the function to call with the outcome, never nil:
// an Observer returning none, as Deliver may return no end, is not
// called back.
func (c *Client) observe(ctx context.Context, env core.Envelope) (map[string]string, func(error)) {
	headers, done := c.Observer.Publish(ctx, env)
	if done == nil {
		done = func(error) {}
	}
	return headers, done
}

// hotSafe reports whether tx's after-commit hook may hand events to the
// hot path: always, unless the store's database can roll back silently and
// tx cannot check before it commits (see core.CommitChecker).
func (c *Client) hotSafe(tx core.Tx) bool {
	if sr, ok := c.store.(core.SilentRollbacker); !ok || !sr.SilentRollback() {
		return true
	}
	_, checks := tx.(core.CommitChecker)
	_, queries := tx.(rowQuerier)
	return checks && queries
}

// rowQuerier runs a query returning at most one row on a transaction; the
// SQL store's check before commit needs it.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// PublishTx is Publish with an explicit transaction. tx must be a
// transaction, not a database handle: a core.Tx (txctx's) gets the hot path
// as in Publish; any other transaction, such as a plain *sql.Tx or
// *sqlx.Tx, has no after-commit hook, so the event is inserted unowned
// and a poller delivers it once it is committed. A nil or finished tx
// returns core.ErrNoTransaction: a core.Tx that is not Active before
// anything else, a plain transaction already committed or rolled back
// once the insert finds it so (txend.Mark: a plain *sql.Tx cannot be
// asked whether it is active before, as a core.Tx is). A transaction of another
// database than the store's is refused with core.ErrForeignTx when it
// tells its database (core.TxDatabase); nothing is written.
func (c *Client) PublishTx(ctx context.Context, tx core.Execer, env core.Envelope) (id string, err error) {
	if ctx == nil {
		return "", core.ErrNilContext
	}
	if isNil(tx) {
		return "", c.refused(ctx, core.ErrNoTransaction, env)
	}
	hooked, ok := tx.(core.Tx)
	if ok && !hooked.Active() {
		return "", c.refused(ctx, core.ErrNoTransaction, env)
	}
	if err := env.Validate(); err != nil {
		return "", c.refused(ctx, err, env)
	}
	ordered, err := c.applyOrder(env)
	if err != nil {
		return "", c.refused(ctx, err, env)
	}
	env = ordered
	if c.Observer != nil {
		headers, done := c.observe(ctx, env)
		defer func() { done(err) }()
		traced, herr := env.WithHeaders(headers)
		if herr != nil {
			return "", fmt.Errorf("outbox: publish %s: the observer's headers: %w", env.ID(), herr)
		}
		env = traced
	}
	hot := c.hot
	if !ok || (hot != nil && !c.hotSafe(hooked)) {
		hot = nil // inserted unowned: the poller delivers it
	}
	var lease core.Lease
	if hot != nil {
		lease = hot.HotLease(env)
	}
	if env.OrderKey() != "" {
		oi, ok := c.store.(core.OrderedInserter)
		if !ok {
			return "", fmt.Errorf("outbox: publish %s: %w: the store does not keep events in order", env.ID(), core.ErrOrderingUnsupported)
		}
		leased, err := oi.InsertOrdered(ctx, tx, env, lease)
		if err != nil {
			return "", fmt.Errorf("outbox: publish %s: %w", env.ID(), txend.Mark(err))
		}
		if !leased {
			hot = nil // behind a pending event of its key: a poller delivers it in turn
		}
	} else if err := c.store.Insert(ctx, tx, env, lease); err != nil {
		return "", fmt.Errorf("outbox: publish %s: %w", env.ID(), txend.Mark(err))
	}
	if !ok {
		return env.ID(), nil
	}
	token := c.mark(hooked, env.ID())
	if hot != nil {
		hooked.AfterCommit(func() {
			if left, known := c.leftOut(ctx, hot, hooked, []string{env.ID()}, token); !known || left[env.ID()] {
				return // no row of its own, or none known: the poller delivers what is stored
			}
			hot.EnqueueHot(env, lease)
		})
	}
	return env.ID(), nil
}

// storedTimeout bounds the read after commit of which events a
// transaction kept (see gone).
const storedTimeout = 10 * time.Second

// statuser reads the status of events by id (jdbcstore.Store does).
type statuser interface {
	Statuses(ctx context.Context, ids []string) (map[string]core.Status, error)
}

// mayBeUndone reports whether tx says a row written in it may have been
// removed before commit by a rollback to a savepoint
// (core.SavepointWatcher), and the store can tell which rows are stored.
// Only then does a hand-off read anything (see gone).
func (c *Client) mayBeUndone(tx core.Tx) bool {
	w, ok := tx.(core.SavepointWatcher)
	_, reads := c.store.(statuser)
	return ok && reads && w.RowsMayBeUndone()
}

// leftOut returns which of ids, inserted on tx by a publish that took
// token (see mark), the hand-off after tx's commit must leave out: none
// when no row of tx may have been undone (see mayBeUndone); else those a
// later publish of the transaction inserted again (see superseded) and
// those with no row (see gone). known is false when that cannot be told:
// none may be handed over.
func (c *Client) leftOut(ctx context.Context, hot handoff.Hot, tx core.Tx, ids []string, token uint64) (left map[string]bool, known bool) {
	if !c.mayBeUndone(tx) {
		return nil, true
	}
	left = make(map[string]bool, len(ids))
	read := make([]string, 0, len(ids))
	for _, id := range ids {
		later, known := c.superseded(tx, id, token)
		switch {
		case !known:
			return c.unknown(hot)
		case later:
			left[id] = true
		default:
			read = append(read, id)
		}
	}
	if len(read) == 0 {
		return left, true
	}
	gone, known := c.gone(ctx, hot, read)
	if !known {
		return nil, false
	}
	for id := range gone {
		left[id] = true
	}
	return left, true
}

// unknown tells hot that a hand-off was left to the poller
// (handoff.Skipper), so that this node's next claim takes its own rows,
// and reports the answer unknown.
func (c *Client) unknown(hot handoff.Hot) (map[string]bool, bool) {
	if s, ok := hot.(handoff.Skipper); ok {
		s.SkipHot()
	}
	return nil, false
}

// gone returns which of ids have no row after their transaction's commit,
// in one read: an event whose row a rollback to a savepoint removed must
// not reach a listener. Should the read fail it reports the answer
// unknown (known false): none may be handed over, and hot is told
// (handoff.Skipper), so that this node's next claim takes its own rows
// and the poller delivers those that exist (a slower delivery, never a
// phantom). After a failed read, hand-offs read nothing for
// storedTimeout and report unknown too: the read runs on the committing
// goroutine after COMMIT, so a database that does not answer (a table
// lock queued behind the transaction, an outage) holds each caller up
// once, not once per event it published. The read is bounded by
// storedTimeout, not by ctx (the publishing call's, whose values it
// keeps): a ctx of the publishing code's own may end before the commit.
func (c *Client) gone(ctx context.Context, hot handoff.Hot, ids []string) (gone map[string]bool, known bool) {
	if since(c.readsPausedUntil.Load()) < 0 {
		return c.unknown(hot)
	}
	// Not ctx's end: a repository function that published with a ctx of
	// its own, ended when the caller commits, would lose the hot path.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storedTimeout)
	defer cancel()
	found, err := c.store.(statuser).Statuses(rctx, ids)
	if err != nil {
		c.readsPausedUntil.Store(int64(time.Since(clockStart) + storedTimeout))
		return c.unknown(hot)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		if _, ok := found[id]; !ok {
			out[id] = true
		}
	}
	return out, true
}

// clockStart is the origin of readsPausedUntil: a monotonic clock, which
// setting the wall clock back does not stretch.
var clockStart = time.Now()

// since returns how long ago the instant at (nanoseconds after
// clockStart) was; negative for one to come.
func since(at int64) time.Duration { return time.Since(clockStart) - time.Duration(at) }

// isNil reports whether ex is nil, a nil pointer (a nil *sql.Tx passed
// as an Execer) or an *sqlx.Tx wrapping no *sql.Tx.
func isNil(ex core.Execer) bool {
	if ex == nil {
		return true
	}
	if v := reflect.ValueOf(ex); v.Kind() == reflect.Pointer && v.IsNil() {
		return true
	}
	x, ok := ex.(*sqlx.Tx)
	return ok && x.Tx == nil
}
