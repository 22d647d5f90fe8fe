package jdbcstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// DefaultInboxTable is the inbox table name [NewInbox] uses when
// Config.Table is empty.
const DefaultInboxTable = "inbox_message"

// InboxStatus is the state of an inbox message. The numeric
// values are stored in the status column and are part of the contract.
type InboxStatus int8

// The stored inbox statuses.
const (
	// InboxSeen: known (deduplication check or transactional processing
	// in progress), not queued for a handler.
	InboxSeen InboxStatus = 0
	// InboxProcessing: queued for a handler; claimable when due.
	InboxProcessing InboxStatus = 1
	// InboxDone: processed; never processed again.
	InboxDone InboxStatus = 2
	// InboxDead: failed for good (poison message); never claimed again.
	InboxDead InboxStatus = 3
)

// String returns Seen, Processing, Done, Dead or InboxStatus(n).
func (s InboxStatus) String() string {
	switch s {
	case InboxSeen:
		return "Seen"
	case InboxProcessing:
		return "Processing"
	case InboxDone:
		return "Done"
	case InboxDead:
		return "Dead"
	}
	return fmt.Sprintf("InboxStatus(%d)", int8(s))
}

// InboxKey is the natural key of an inbox message: the sending system and
// its message id. Both compare byte for byte.
type InboxKey struct {
	Source    string
	MessageID string
}

// InboxMessage is an inbound message as the inbox stores it: Enqueue and
// Touch take one. Validation happens in package inbox; the store assumes
// valid text of at most 255 characters, and a hash of at most
// [MaxInboxHashLen] bytes.
type InboxMessage struct {
	Source    string
	MessageID string
	Topic     string
	// Payload is stored as given, byte for byte; nil is stored as empty.
	Payload []byte
	// Hash is an optional content hash (nil or empty: none).
	Hash []byte
	// DueAt defers the first claim until then; zero means at once.
	DueAt time.Time
}

// Key returns the message's natural key.
func (m InboxMessage) Key() InboxKey { return InboxKey{Source: m.Source, MessageID: m.MessageID} }

// MaxInboxHashLen is the longest content hash the hash column holds.
const MaxInboxHashLen = 1024

// InboxRecord is a stored inbox row.
type InboxRecord struct {
	Source    string
	MessageID string
	Topic     string
	Payload   []byte // never nil
	Hash      []byte // nil when none was given
	Status    InboxStatus
	// Attempt counts failed handling attempts (abandons and the final fail).
	Attempt int
	// FirstSeenAt is when the message was first recorded, LastSeenAt when
	// it was last delivered (deduplication check, processing or enqueue).
	FirstSeenAt, LastSeenAt time.Time
	// NextAttemptAt is when a Processing message may be claimed (again).
	NextAttemptAt time.Time
	// DueAt is the requested earliest processing time; zero means none.
	DueAt time.Time
	// LockedBy and LockedUntil are the current lease; empty/zero when none.
	LockedBy    string
	LockedUntil time.Time
	// LastError is the error of the last failed attempt, or "".
	LastError string
	// DecodeErr is set when a stored column could not be read back (a row
	// edited by hand). The key columns are always filled in.
	DecodeErr error
}

// Key returns the record's natural key.
func (r InboxRecord) Key() InboxKey { return InboxKey{Source: r.Source, MessageID: r.MessageID} }

// InboxTouch is what [InboxStore.Touch] found: the row's state after the
// delivery was recorded.
type InboxTouch struct {
	Status      InboxStatus
	Attempt     int
	Hash        []byte // the stored hash (the first one given)
	LockedBy    string
	LockedUntil time.Time
	// HashMismatch: the delivery's hash and the stored hash are both set
	// and differ (same key, different content).
	HashMismatch bool
}

// InboxEnqueueResult tells what [InboxStore.Enqueue] did.
type InboxEnqueueResult struct {
	// Inserted: the message was new.
	Inserted bool
	// Previous is the status the row had before (when not Inserted).
	Previous InboxStatus
	// Status is the status after the enqueue.
	Status InboxStatus
	// HashMismatch: the row existed with a different hash.
	HashMismatch bool
}

// ExecQueryer runs statements and queries: *sql.Tx, *sqlx.Tx and
// *txctx.Tx satisfy it (and *sql.DB, *sqlx.DB, which package inbox refuses
// where a transaction is needed).
type ExecQueryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
