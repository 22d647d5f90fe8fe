package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxOrderKeyLen is the longest ordering key, in characters. An
// aggregate's key (AggregateOrderKey) always fits.
const MaxOrderKeyLen = 255

var (
	// ErrOrderKeyTooLong: the ordering key is longer than MaxOrderKeyLen.
	ErrOrderKeyTooLong = errors.New("outbox: ordering key is too long")
	// ErrNoOrderKey: an event to deliver in order has no key: neither an
	// explicit one (Builder.OrderKey) nor an aggregate (type and id) to
	// take it from.
	ErrNoOrderKey = errors.New("outbox: ordered event without an ordering key (set the aggregate or Builder.OrderKey)")
	// ErrOrderingUnsupported: the store cannot keep events in order per
	// key (it does not implement OrderedInserter), or the transaction
	// cannot run the queries that take the key's next position.
	ErrOrderingUnsupported = errors.New("outbox: ordered delivery is not supported here")
	// ErrInvalidDeadPolicy: a DeadPolicy other than BlockOnDead and
	// SkipOnDead (Builder.OnDead).
	ErrInvalidDeadPolicy = errors.New("outbox: unknown dead policy")
)

// DeadPolicy is what an ordered event that went DEAD does to the later
// events of its key.
type DeadPolicy uint8

const (
	// BlockOnDead (the default) holds the key: its later events wait
	// until the dead event is replayed (and delivered) or discarded
	// (deleted, for example by the retention purge).
	BlockOnDead DeadPolicy = iota
	// SkipOnDead releases the key: its next event is delivered as if the
	// dead one had succeeded.
	SkipOnDead
)

// String returns "block", "skip" or DeadPolicy(n).
func (p DeadPolicy) String() string {
	switch p {
	case BlockOnDead:
		return "block"
	case SkipOnDead:
		return "skip"
	}
	return fmt.Sprintf("DeadPolicy(%d)", uint8(p))
}

// AggregateOrderKey is the ordering key of an aggregate: its type and id
// joined by ':' ("Order:42"). It is the key of an ordered event that has
// no explicit one, so all the events of one aggregate are delivered in
// commit order.
//
// No two aggregates share a key. "type:id" alone cannot tell the type
// "a:b" with the id "c" from the type "a" with the id "b:c", so a type
// that holds ':' (or begins with a backslash) is preceded by a
// backslash, its length in characters and ':' (`\3:a:b:c` for the
// first, "a:b:c" for the second). Every other aggregate keeps the
// "type:id" key earlier versions gave it. The key of a valid aggregate
// (MaxAggregateTypeLen, MaxAggregateIDLen) always fits MaxOrderKeyLen.
func AggregateOrderKey(aggregateType, aggregateID string) string {
	if !strings.Contains(aggregateType, ":") && !strings.HasPrefix(aggregateType, `\`) {
		return aggregateType + ":" + aggregateID
	}
	// Only keys of this form begin with a backslash (an empty type gives
	// ":id"), and the length says where the type ends.
	return `\` + strconv.Itoa(utf8.RuneCountInString(aggregateType)) + ":" + aggregateType + ":" + aggregateID
}

// OrderKey returns the key the event is delivered in order with, or ""
// when it is unordered.
func (e Envelope) OrderKey() string { return e.orderKey }

// OnDead returns what the event does to its key should it go DEAD
// (meaningful for ordered events only).
func (e Envelope) OnDead() DeadPolicy { return e.onDead }

// Ordered returns a copy of e delivered in order with the other events of
// key (AggregateOrderKey of its aggregate when key is ""), with onDead as
// its policy should it go DEAD. An event that is ordered already keeps
// its key and policy. It fails with ErrNoOrderKey when there is no key to
// take, ErrOrderKeyTooLong or ErrInvalidText for a bad one.
func (e Envelope) Ordered(key string, onDead DeadPolicy) (Envelope, error) {
	if e.orderKey != "" {
		return e, nil
	}
	if key == "" {
		if e.aggregateType == "" || e.aggregateID == "" {
			return Envelope{}, invalid("order_key", ErrNoOrderKey, "")
		}
		key = AggregateOrderKey(e.aggregateType, e.aggregateID)
	}
	if err := checkOrder(key, onDead); err != nil {
		return Envelope{}, err
	}
	e.orderKey, e.onDead = key, onDead
	return e, nil
}

// checkOrder validates an ordering key and policy.
func checkOrder(key string, onDead DeadPolicy) error {
	if err := checkText("order_key", key, MaxOrderKeyLen, ErrOrderKeyTooLong); err != nil {
		return err
	}
	return checkDeadPolicy(onDead)
}

// checkDeadPolicy validates a dead policy.
func checkDeadPolicy(onDead DeadPolicy) error {
	if onDead > SkipOnDead {
		return invalid("on_dead", ErrInvalidDeadPolicy, fmt.Sprintf("%d (want BlockOnDead or SkipOnDead)", uint8(onDead)))
	}
	return nil
}

// OrderedInserter is implemented by stores that deliver events in order
// per key (jdbcstore.Store does). The publishing client calls it instead
// of Inserter.Insert for an event with an OrderKey.
type OrderedInserter interface {
	// InsertOrdered inserts env like Insert, as the next event of its key
	// in the order of the transactions that publish on the key (the key's
	// position is taken under a lock held until ex commits or rolls
	// back, so concurrent transactions on one key are serialized and a
	// rollback leaves no gap). It reports whether the row was inserted
	// with lease: false when an earlier event of the key is still
	// pending, in which case the row is inserted without an owner and a
	// poller delivers it once its predecessor finished.
	InsertOrdered(ctx context.Context, ex Execer, env Envelope, lease Lease) (leased bool, err error)
}

// OrderPos is the position of an ordered event: its key and its place
// among the key's events (1, 2, ..., without gaps).
type OrderPos struct {
	Key string
	Seq int64
}

// NextRequest asks a [SuccessorClaimer] to lease the events right after
// finished ones of their keys.
type NextRequest struct {
	Owner      string     // the claiming node's owner token
	Now        time.Time  // rows due at or before Now
	LeaseUntil time.Time  // end of the new lease
	After      []OrderPos // finished events: the event after each is wanted
}

// SuccessorClaimer is implemented by a store that keeps events in order
// ([OrderedInserter]) and can lease the next event of a key straight from
// its position (jdbcstore.Store does). A dispatcher whose store has it
// asks it instead of [KeyWaiters]. Once an ordered event finished, the
// poller claims the event after it this way, through the key's index,
// instead of claiming every due row: an ordered backlog then drains at
// the cost of one lookup per event, however many rows wait behind the
// heads of their keys. A store without it has the poller make a full
// claim instead.
type SuccessorClaimer interface {
	// ClaimNext leases to Owner until LeaseUntil, for each position of
	// After, the event of the same key at the next position, when it is
	// claimable: NEW or RETRY, due at Now, unowned or leased by a node
	// whose lease ended before Now, and its predecessor finished (DONE,
	// deleted, or DEAD under the skip policy). Events this node leases
	// already are left to the poller's claims. A position with no such
	// event is skipped; of two positions of a key, the later counts. A
	// position whose next event would be claimable but is not due yet
	// comes back in NextResult.Later. An empty After returns nothing.
	ClaimNext(ctx context.Context, req NextRequest) (NextResult, error)
	// WaitingAfter returns the positions of those of the finished
	// ordered events ids behind which an event waits for a poller (NEW
	// or RETRY, unowned or leased by a node whose lease ended before
	// now), one per key (its latest); ids of unordered or unknown events
	// are ignored. The dispatcher asks it for the events of the hot path,
	// whose positions it does not know, and has ClaimNext called only
	// for those.
	WaitingAfter(ctx context.Context, now time.Time, ids []string) ([]OrderPos, error)
}

// NextResult is what [SuccessorClaimer.ClaimNext] found.
type NextResult struct {
	// Claimed are the rows leased, in claim order (available_at,
	// created_at, event_id).
	Claimed []Record
	// Locked are the positions whose next event waits for a poller but
	// whose row another transaction held locked, so the claim, which
	// skips locked rows, left it (on MySQL/MariaDB the transaction that
	// publishes the event after it locks it until that transaction
	// ends). The caller asks for them again shortly.
	Locked []OrderPos
	// Later are the positions whose next event waits for a poller, its
	// predecessor finished, but is not due at the request's Now (a
	// delayed event: Builder.Delay, Builder.NotBefore; or a retry's
	// backoff), and NextDue is the earliest time one of them becomes due
	// (zero when Later is empty). The caller asks for them again then: no
	// poll would otherwise claim such an event before its next full claim.
	Later   []OrderPos
	NextDue time.Time
}

// Ordering says which events are delivered in order per key without their
// builder asking for it (Builder.Ordered, Builder.OrderKey). The zero
// value orders nothing more. outbox.Config.Ordering and
// tenant.Config.Ordering hold one.
type Ordering struct {
	// Types are the event types delivered in order by the key of their
	// aggregate (AggregateOrderKey); "*" stands for every type. An event
	// of such a type with neither an aggregate nor an explicit key is
	// refused at Publish with ErrNoOrderKey.
	Types []string
	// OnDead is the policy of those events should they go DEAD:
	// BlockOnDead (the default) or SkipOnDead. An event ordered by its
	// builder, or whose builder set OnDead, keeps the builder's policy.
	OnDead DeadPolicy
}

// Validate reports every problem of o at once (errors.Join of
// *ConfigError naming the field). Each also wraps the sentinel an
// envelope with that value would fail with: ErrEmptyEventType,
// ErrEventTypeTooLong or ErrInvalidText for Types[i],
// ErrInvalidDeadPolicy for OnDead.
func (o Ordering) Validate() error {
	var errs []error
	for i, t := range o.Types {
		field := fmt.Sprintf("Types[%d]", i)
		if t == "" {
			errs = append(errs, &ConfigError{Field: field, Msg: "must not be empty", Err: ErrEmptyEventType})
		} else if t != wildcardType {
			var ve *ValidationError
			if err := checkText("event_type", t, MaxEventTypeLen, ErrEventTypeTooLong); errors.As(err, &ve) {
				msg := ve.Msg // the length; "" for invalid text
				if msg == "" {
					msg = "is not a valid event type"
				}
				errs = append(errs, &ConfigError{Field: field, Msg: msg, Err: ve.Err})
			}
		}
	}
	if err := checkDeadPolicy(o.OnDead); err != nil {
		errs = append(errs, &ConfigError{Field: "OnDead", Msg: fmt.Sprintf("unknown policy %d (want BlockOnDead or SkipOnDead)", uint8(o.OnDead)),
			Err: ErrInvalidDeadPolicy})
	}
	return errors.Join(errs...)
}

// Apply returns env ordered by its aggregate's key when its type is one
// of o.Types (see Envelope.Ordered), env itself otherwise.
func (o Ordering) Apply(env Envelope) (Envelope, error) {
	if env.orderKey != "" || len(o.Types) == 0 {
		return env, nil
	}
	for _, t := range o.Types {
		if t == wildcardType || t == env.eventType {
			onDead := o.OnDead
			if env.onDeadSet {
				onDead = env.onDead
			}
			return env.Ordered("", onDead)
		}
	}
	return env, nil
}
