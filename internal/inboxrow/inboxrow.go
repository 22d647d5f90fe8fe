// Package inboxrow is the seam between package inbox and the inbox's SQL
// store, which lives in jdbcstore beside the SQL machinery it shares with
// the outbox store (busy retries, transactions, schema templates, the
// dialects) but exports nothing: jdbcstore sets [Open] in its init, and
// package inbox, which imports jdbcstore, calls it.
//
// The types here are the rows the store reads and writes. Package inbox
// defines the public types (inbox.Message, inbox.Record, …) and converts
// at the boundary. This package imports none of ours, so that both sides
// can import it.
package inboxrow

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
)

// Status is the state of an inbox row. The numeric values are stored in
// the status column and are part of the contract.
type Status int8

// The stored statuses.
const (
	// Seen: known (deduplication check or transactional processing in
	// progress), not queued for a handler.
	Seen Status = 0
	// Processing: queued for a handler; claimable when due.
	Processing Status = 1
	// Done: processed; never processed again.
	Done Status = 2
	// Dead: failed for good; never claimed again.
	Dead Status = 3
)

// Key is the natural key of a row.
type Key struct {
	Source    string
	MessageID string
}

// Message is a delivery as Touch and Enqueue store it. Package inbox has
// validated it: valid text of at most 255 characters, a hash that fits
// the hash column (inbox.MaxHashLen).
type Message struct {
	Source    string
	MessageID string
	Topic     string
	Payload   []byte // nil is stored as empty
	Hash      []byte // nil or empty: none
	DueAt     time.Time
}

// Key returns the message's natural key.
func (m Message) Key() Key { return Key{Source: m.Source, MessageID: m.MessageID} }

// Record is a stored row (see inbox.Record for the meaning of the fields).
type Record struct {
	Source                  string
	MessageID               string
	Topic                   string
	Payload                 []byte // never nil
	Hash                    []byte // nil when none was given
	Status                  Status
	Attempt                 int
	FirstSeenAt, LastSeenAt time.Time
	NextAttemptAt           time.Time
	DueAt                   time.Time
	LockedBy                string
	LockedUntil             time.Time
	LastError               string
	DecodeErr               error
}

// Key returns the record's natural key.
func (r Record) Key() Key { return Key{Source: r.Source, MessageID: r.MessageID} }

// Touch is what Store.Touch found: the row's state after the delivery was
// recorded.
type Touch struct {
	Status      Status
	Attempt     int
	Hash        []byte // the stored hash (the first one given)
	LockedBy    string
	LockedUntil time.Time
	// LastSeenAt is the last_seen_at this Touch wrote: never the time the
	// row held before, so MarkDoneTx can tell that the row still holds
	// this transaction's write.
	LastSeenAt time.Time
	// HashMismatch: the delivery's hash and the stored hash are both set
	// and differ (same key, different content).
	HashMismatch bool
}

// EnqueueResult tells what Store.Enqueue did.
type EnqueueResult struct {
	// Inserted: the message was new.
	Inserted bool
	// Previous is the status the row had before (when not Inserted).
	Previous Status
	// Status is the status after the enqueue.
	Status Status
	// HashMismatch: the row existed with a different hash.
	HashMismatch bool
}

// Lease names the claim a lease holder's write (Ack, Release, Abandon,
// Fail) is fenced on: the owner token the claim was taken under and, when
// not zero, the lease expiry it wrote (the claimed Record's LockedUntil).
//
// The expiry tells one owner's claims of a message apart. A message is
// claimed only while it has no lease or an expired one, so a claim that
// finds the owner's earlier lease still in place writes a later expiry
// (now is past the old one, the lease is positive); a claim after the
// lease was cleared (reaped, released, abandoned) runs later still on the
// owner's clock. So the handling of an earlier claim that outlived its
// lease cannot settle the current claim of the same owner, as long as the
// owner's clock does not go back by more than the time between the two
// claims (leases rely on the clocks anyway).
//
// With Until zero the write is fenced on the owner alone: any claim it
// holds.
type Lease struct {
	Owner string
	Until time.Time
}

// Tx runs statements and queries: the caller's transaction (inbox.Tx has
// the same method set) or the store's own.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Store is the inbox's SQL store: what package inbox calls. The methods
// are documented on jdbcstore's implementation. Errors are wrapped, and
// IsContention tells lock contention apart.
type Store interface {
	Table() string
	SchemaSQL() string
	ApplySchema(ctx context.Context) error
	CheckTable(ctx context.Context) error
	IsContention(err error) bool

	Touch(ctx context.Context, tx Tx, m Message) (Touch, error)
	MarkDoneTx(ctx context.Context, tx Tx, k Key, touched time.Time) error
	AlreadyProcessed(ctx context.Context, k Key, hash []byte) (Touch, error)
	MarkProcessed(ctx context.Context, k Key) error
	Enqueue(ctx context.Context, m Message) (EnqueueResult, error)
	Get(ctx context.Context, k Key) (Record, error)

	Claim(ctx context.Context, owner string, lease time.Duration, limit int) ([]Record, error)
	Ack(ctx context.Context, l Lease, keys []Key) (int64, error)
	Release(ctx context.Context, l Lease, keys []Key) (int64, error)
	PutOff(ctx context.Context, l Lease, keys []Key, lastError string, delay time.Duration) (int64, error)
	Abandon(ctx context.Context, l Lease, keys []Key, lastError string, delay func(attempt int) time.Duration) (int64, error)
	Fail(ctx context.Context, l Lease, keys []Key, errMsg string, refund bool) (int64, error)
	ReapExpired(ctx context.Context, limit int) (int64, error)
	Cleanup(ctx context.Context, olderThan time.Duration, batch int) (int64, error)
}

// Options configures the store [Open] returns. Every field is resolved
// by package inbox except Dialect.
type Options struct {
	// Dialect is a jdbcstore.Dialect, or nil to detect it from the
	// handle's driver name. (This package cannot name the type: jdbcstore
	// imports it.)
	Dialect any
	// Table is the table name; it must not be empty.
	Table string
	// MaxErrorLen is how many characters of an error are stored; 0 means
	// jdbcstore's default.
	MaxErrorLen int
	// Now is the clock of every stored time.
	Now func() time.Time
	// Logger receives warnings about the database setup.
	Logger *slog.Logger
}

// Open validates o, renders the SQL and returns the store over db,
// without touching the database. jdbcstore sets it in its init; package
// inbox imports jdbcstore, so it is set before inbox can call it.
var Open func(db *sqlx.DB, o Options) (Store, error)
