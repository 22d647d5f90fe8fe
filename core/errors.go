package core

import (
	"errors"
	"fmt"
)

// Validation errors. Each is returned wrapped in a *[ValidationError] and can
// be matched with errors.Is.
var (
	// ErrEmptyEventType reports an envelope without an event type.
	ErrEmptyEventType = errors.New("outbox: event type is empty")
	// ErrEventTypeTooLong reports an event type over MaxEventTypeLen characters.
	ErrEventTypeTooLong = errors.New("outbox: event type is too long")
	// ErrAggregateTypeTooLong reports an aggregate type over MaxAggregateTypeLen characters.
	ErrAggregateTypeTooLong = errors.New("outbox: aggregate type is too long")
	// ErrAggregateIDTooLong reports an aggregate id over MaxAggregateIDLen characters.
	ErrAggregateIDTooLong = errors.New("outbox: aggregate id is too long")
	// ErrTenantIDTooLong reports a tenant id over MaxTenantIDLen characters.
	ErrTenantIDTooLong = errors.New("outbox: tenant id is too long")
	// ErrInvalidEventID reports an event id longer than MaxEventIDLen
	// characters, or an envelope with an event type but no id (the zero
	// Envelope, which has neither, reports ErrEmptyEventType first).
	// Builder.ID("") sets no id: Build then assigns a ULID.
	ErrInvalidEventID = errors.New("outbox: invalid event id")
	// ErrWildcardEventType reports a new event of type "*": that is the
	// wildcard of listener registries (and of Ordering.Types), which
	// stands for every type, so no listener could be registered for
	// that type alone.
	ErrWildcardEventType = errors.New(`outbox: event type "*" is the wildcard, no event type`)
	// ErrInvalidText reports a text field that is not valid UTF-8 or holds a NUL byte.
	ErrInvalidText = errors.New("outbox: text is not valid UTF-8 or contains NUL")
	// ErrInvalidHeader reports a header with an empty key, or a key or value
	// that is not valid UTF-8 or holds a NUL byte.
	ErrInvalidHeader = errors.New("outbox: invalid header")
	// ErrNoPayload reports an envelope with neither a JSON nor a bytes payload.
	ErrNoPayload = errors.New("outbox: no payload: set exactly one of JSON or bytes")
	// ErrBothPayloads reports an envelope given both a JSON and a bytes payload.
	ErrBothPayloads = errors.New("outbox: both JSON and bytes payloads set: set exactly one")
	// ErrInvalidJSON reports a JSON payload that is not valid JSON, or
	// not valid UTF-8 (which no supported database stores as JSON); a
	// store also returns it, before the database sees the payload, for
	// valid JSON its database's JSON column would refuse or blow up (see
	// the dialects: PostgreSQL's jsonb, MySQL's and MariaDB's JSON).
	ErrInvalidJSON = errors.New("outbox: payload is not valid JSON")
	// ErrPayloadTooLarge reports a payload over MaxPayloadBytes bytes.
	ErrPayloadTooLarge = errors.New("outbox: payload is too large")
	// ErrHeaderKeyTooLong reports a header key over MaxHeaderKeyLen characters.
	ErrHeaderKeyTooLong = errors.New("outbox: header key is too long")
	// ErrHeadersTooLarge reports headers whose JSON encoding, as the
	// outbox stores it, is over MaxHeadersBytes bytes.
	ErrHeadersTooLarge = errors.New("outbox: headers are too large")
	// ErrTimeOutOfRange reports an OccurredAt or NotBefore outside the
	// years MinTimeYear to MaxTimeYear (UTC).
	ErrTimeOutOfRange = errors.New("outbox: time is out of range")
)

// Runtime errors.
var (
	// ErrNoTransaction is returned by Publish when ctx carries no active
	// transaction. Nothing is written.
	ErrNoTransaction = errors.New("outbox: no active transaction")
	// ErrDuplicateEvent is returned by a Store when an event id already exists.
	ErrDuplicateEvent = errors.New("outbox: duplicate event id")
	// ErrClosed is returned by components used after Close.
	ErrClosed = errors.New("outbox: closed")
	// ErrInvalidConfig reports a configuration value that cannot work.
	ErrInvalidConfig = errors.New("outbox: invalid configuration")
	// ErrInvalidIdentifier reports a table or other SQL identifier from
	// configuration that is not a plain identifier.
	ErrInvalidIdentifier = errors.New("outbox: invalid SQL identifier")
	// ErrDecode reports a stored row that cannot be turned back into an envelope.
	ErrDecode = errors.New("outbox: cannot decode stored event")
	// ErrForeignTx is returned when a transaction is used with a database
	// it does not belong to: Publish on a transaction of another outbox's
	// database (nothing is written), or txctx's Manager.Do on a context
	// carrying another database's transaction.
	ErrForeignTx = errors.New("outbox: context carries an active transaction of another database")
	// ErrTxAborted is returned by a commit when the database had already
	// rolled the transaction back on its own: MySQL and MariaDB do that
	// after a deadlock, a lock wait timeout (with innodb_rollback_on_timeout)
	// or a killed connection, and then let a later COMMIT "succeed" on
	// nothing if the business code ignored the failed statement. Nothing
	// was committed, after-commit hooks do not run, after-rollback hooks
	// do. Run the whole transaction again.
	ErrTxAborted = errors.New("outbox: the database rolled the transaction back before commit")
	// ErrNilContext is returned, before anything runs, when a nil
	// context.Context is given (pass context.Background() or
	// context.TODO() instead) to outbox.New or a method of an
	// outbox.Outbox that returns an error; txctx.Manager.Do; Start, Close,
	// PollOnce, ReapOnce and RemoveStore of a dispatcher or poller;
	// Start, Close and RunOnce of a cleanup.Cleaner; every method of a
	// jdbcstore.Store, an inbox.Inbox or an inbox.Dispatcher that takes a
	// context and returns an error; the relays' OnEvent and Close, and
	// rabbitmq.New; tenant.New, tenant.NewInbox,
	// tenant.Open and the methods of their sets and tenants; inbox.New. A
	// nil ctx is refused before any other argument is looked at (one that
	// reached database/sql would panic holding the pool's lock, and every
	// later use of the pool would wait for ever).
	ErrNilContext = errors.New("outbox: nil context")
)

// ValidationError tells which field of an envelope is invalid. It wraps one
// of the Err* sentinels of this package.
type ValidationError struct {
	Field string // the envelope field, e.g. "event_type"
	Err   error  // the sentinel, e.g. ErrEventTypeTooLong
	Msg   string // optional detail, never the field's content
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%v (field %s)", e.Err, e.Field)
	}
	return fmt.Sprintf("%v (field %s: %s)", e.Err, e.Field, e.Msg)
}

// Unwrap returns the sentinel error.
func (e *ValidationError) Unwrap() error { return e.Err }

func invalid(field string, err error, msg string) error {
	return &ValidationError{Field: field, Err: err, Msg: msg}
}

// ConfigError reports one invalid configuration field. It wraps
// ErrInvalidConfig and, when set, Err (a more precise sentinel such as
// ErrInvalidIdentifier), so errors.Is matches either.
//
// Field is the path of the field from the Config given to the function
// that reports it: "Workers" from dispatcher.New, "Dispatcher.Workers"
// from outbox.New, whose Config holds a dispatcher.Config in its
// Dispatcher field. A function that validates a whole Config reports
// every invalid field at once, each as its own ConfigError joined with
// errors.Join; errors.As finds the first.
type ConfigError struct {
	Field string // path of the field, e.g. "Workers" or "Dispatcher.Workers"
	Msg   string // why it is invalid
	Err   error  // optional sentinel wrapped besides ErrInvalidConfig
}

// Error implements error. It starts with Err's text when Err is set, with
// ErrInvalidConfig's otherwise.
func (e *ConfigError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: %s %s", e.Err, e.Field, e.Msg)
	}
	return fmt.Sprintf("%v: %s %s", ErrInvalidConfig, e.Field, e.Msg)
}

// Unwrap returns ErrInvalidConfig and, when set, Err.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// ErrNotFound is returned by lookups of an event id that does not exist.
var ErrNotFound = errors.New("outbox: event not found")
