package inbox

import (
	"context"
	"time"

	"github.com/outbox-go/outbox/jdbcstore"
)

// The stored types live in jdbcstore (the store returns them); these
// aliases are the names to use.
type (
	// Message is an inbound message: Source and MessageID (the natural
	// key), Topic (routes it to a handler), Payload (any bytes, never
	// interpreted), an optional content Hash and an optional DueAt.
	Message = jdbcstore.InboxMessage
	// Record is a stored message with its state, attempts, times and lease.
	Record = jdbcstore.InboxRecord
	// Key is the natural key (Source, MessageID).
	Key = jdbcstore.InboxKey
	// Status is Seen, Processing, Done or Dead.
	Status = jdbcstore.InboxStatus
	// Tx is a transaction the inbox can write on: *sql.Tx, *sqlx.Tx and
	// *txctx.Tx satisfy it.
	Tx = jdbcstore.ExecQueryer
)

// The message states.
const (
	// StatusSeen: recorded by a deduplication check (or by ProcessTx
	// whose fn failed in a transaction that was committed anyway); not
	// queued.
	StatusSeen = jdbcstore.InboxSeen
	// StatusProcessing: queued for a handler.
	StatusProcessing = jdbcstore.InboxProcessing
	// StatusDone: processed; never processed again.
	StatusDone = jdbcstore.InboxDone
	// StatusDead: failed for good; never claimed again.
	StatusDead = jdbcstore.InboxDead
)

// Handler processes the messages of one topic. It gets the full record
// (payload, attempt, times) and a context that ends at the dispatcher's
// HandlerTimeout or at a hard stop; it must honor it. Returning an error or
// panicking fails the attempt: the message is retried with backoff, and
// is Dead after MaxAttempts. Delivery to handlers is at least once (a
// crash between the handler and the acknowledgement repeats it), so a
// handler that must have its effect once should write through ProcessTx
// or be idempotent.
type Handler interface {
	Handle(ctx context.Context, msg Record) error
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, msg Record) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, msg Record) error { return f(ctx, msg) }

// Backoff is the default retry policy of the inbox: the delay
// before the next attempt is min(2^attempt seconds, 60 seconds), attempt
// being the number of failed attempts so far (1 after the first failure:
// 2 s, 4 s, 8 s, … 60 s). It has no jitter. It implements retry.Policy;
// any retry.Policy can replace it.
type Backoff struct{}

// MaxBackoff is the longest delay of [Backoff].
const MaxBackoff = 60 * time.Second

// Delay returns min(2^attempts s, 60 s); attempts below 0 count as 0.
func (Backoff) Delay(attempts int) time.Duration {
	if attempts < 0 {
		attempts = 0
	}
	if attempts >= 6 { // 2^6 s > 60 s
		return MaxBackoff
	}
	return time.Duration(1<<attempts) * time.Second
}
