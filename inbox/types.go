package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Message is an inbound message, as [Inbox.Enqueue] and [Inbox.ProcessTx]
// take it.
type Message struct {
	// Source names the sending system; with MessageID it is the message's
	// natural key. Both are compared byte for byte (case, trailing spaces
	// and 4-byte characters count). Required; at most [MaxIDLen]
	// characters of valid UTF-8 without NUL.
	Source string
	// MessageID is the sender's id of the message, unique per Source.
	// Required; same rules as Source.
	MessageID string
	// Topic routes the message to the [Handler] registered for it with
	// [Dispatcher.Handle]. Required by Enqueue, optional for ProcessTx
	// (stored for inspection); at most [MaxIDLen] characters.
	Topic string
	// Payload is stored as given, byte for byte, and never interpreted or
	// logged; at most [MaxPayloadBytes] (1 MiB). Enqueue requires it to be
	// non-nil (use []byte{} for an empty payload); ProcessTx stores nil as
	// empty.
	Payload []byte
	// Hash is an optional content hash of at most [MaxHashLen] bytes
	// (nil or empty: none). A redelivery with a different hash is logged
	// as a warning, never refused. The stored hash is the first one given,
	// except that [Inbox.Enqueue] of a message not yet Done stores the new
	// payload and hash (see there).
	Hash []byte
	// DueAt defers the first claim by a dispatcher until then (Enqueue
	// only); zero or past means at once. It must fall within the years
	// core.MinTimeYear to core.MaxTimeYear in UTC (ErrDueAtOutOfRange).
	DueAt time.Time
}

// Key returns the message's natural key.
func (m Message) Key() Key { return Key{Source: m.Source, MessageID: m.MessageID} }

// Record is a message as the inbox stores it, with its state: what
// [Inbox.Get] and [Inbox.Claim] return and what a [Handler] gets.
type Record struct {
	// Source, MessageID, Topic and Payload are the message's (see
	// [Message]).
	Source    string
	MessageID string
	Topic     string
	// Payload is never nil.
	Payload []byte
	// Hash is the stored content hash (see Message.Hash); nil when none
	// was given.
	Hash []byte
	// Status is Seen, Processing, Done or Dead.
	Status Status
	// Attempt counts the handling attempts: each claim charges one (1
	// during the first run of a handler, 2 during the first retry), a
	// claim handed back with Release gives it back, and one whose
	// handling ended without an outcome (its process died, or it outlived
	// its lease) keeps it. 0 before the first claim.
	Attempt int
	// FirstSeenAt is when the message was first recorded, LastSeenAt when
	// it was last delivered (deduplication check, processing or enqueue)
	// or, if later, when it became Done or Dead. Cleanup counts retention
	// from LastSeenAt.
	FirstSeenAt, LastSeenAt time.Time
	// NextAttemptAt is when a Processing message may be claimed (again):
	// the later of its retry time and DueAt.
	NextAttemptAt time.Time
	// DueAt is the requested earliest processing time; zero means none.
	DueAt time.Time
	// LockedBy and LockedUntil are the current lease (the owner token of
	// the dispatcher or worker handling the message, and its expiry);
	// empty and zero when there is none. Together they identify the claim:
	// the owner's next claim of the message writes a later expiry.
	LockedBy    string
	LockedUntil time.Time
	// LastError is the error of the last failed attempt, or "".
	LastError string
	// DecodeErr is set when a stored column could not be read back (a row
	// edited by hand); the other fields then hold what could be read. The
	// key columns are always filled in.
	DecodeErr error
}

// Key returns the record's natural key.
func (r Record) Key() Key { return Key{Source: r.Source, MessageID: r.MessageID} }

// Key is the natural key of a message: the sending system and its id for
// the message. Both compare byte for byte.
type Key struct {
	// Source names the sending system.
	Source string
	// MessageID is the sender's id of the message, unique per Source.
	MessageID string
}

// Status is the state of a stored message. The numeric values are stored
// in the status column and never change.
type Status int8

// The message states.
const (
	// StatusSeen: recorded by a deduplication check (or by ProcessTx
	// whose fn failed in a transaction that was committed anyway); not
	// queued.
	StatusSeen Status = 0
	// StatusProcessing: queued for a handler; claimable once its next
	// attempt and due times have come.
	StatusProcessing Status = 1
	// StatusDone: processed; never processed again.
	StatusDone Status = 2
	// StatusDead: failed for good; never claimed again.
	StatusDead Status = 3
)

// String returns Seen, Processing, Done, Dead or Status(n).
func (s Status) String() string {
	switch s {
	case StatusSeen:
		return "Seen"
	case StatusProcessing:
		return "Processing"
	case StatusDone:
		return "Done"
	case StatusDead:
		return "Dead"
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// Tx is a transaction the inbox can write on: *sql.Tx, *sqlx.Tx and
// *txctx.Tx satisfy it. [Inbox.ProcessTx] refuses a database handle
// (*sql.DB, *sql.Conn, *sqlx.DB, *sqlx.Conn), which satisfies it too,
// because its guarantee needs the caller's transaction.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Handler processes the messages of one topic. It gets the full record
// (payload, attempt, times) and a context that ends at the dispatcher's
// HandlerTimeout or at a hard stop; it must honor it. Returning an error or
// panicking fails the attempt: the message is retried with backoff, and
// is Dead after MaxAttempts. An attempt that ends without an outcome
// counts too: the claim charged it, so a message whose handler crashes
// the process is Dead after MaxAttempts as well. A handler that outlives
// its lease may find the message claimed again (by its own dispatcher
// too) and run at the same time as the new claim's handler; its outcome
// is then dropped. Delivery to handlers is at least once (a crash between
// the handler and the acknowledgement repeats it), so a handler that must
// have its effect once should be idempotent or write through
// [Inbox.ProcessTx] or [Inbox.Process] with its own ctx and its own
// message (the Record's Source and MessageID): they recognise the
// dispatcher's lease as the handler's, and the effect and the Done mark
// commit together.
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
