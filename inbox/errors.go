package inbox

import "errors"

// Validation errors. Each is returned wrapped in a *core.ValidationError
// (which names the field) and can be matched with errors.Is. Nothing is
// written when one is returned.
var (
	// ErrEmptyMessageID reports an empty message id.
	ErrEmptyMessageID = errors.New("outbox: inbox: message id is empty")
	// ErrMessageIDTooLong reports a message id over MaxIDLen characters.
	ErrMessageIDTooLong = errors.New("outbox: inbox: message id is too long")
	// ErrEmptySource reports an empty source.
	ErrEmptySource = errors.New("outbox: inbox: source is empty")
	// ErrSourceTooLong reports a source over MaxIDLen characters.
	ErrSourceTooLong = errors.New("outbox: inbox: source is too long")
	// ErrEmptyTopic reports an empty topic where one is required
	// or an empty topic given to Dispatcher.Handle.
	ErrEmptyTopic = errors.New("outbox: inbox: topic is empty")
	// ErrTopicTooLong reports a topic over MaxIDLen characters.
	ErrTopicTooLong = errors.New("outbox: inbox: topic is too long")
	// ErrInvalidText reports a message id, source or topic that is not
	// valid UTF-8 or holds a NUL byte.
	ErrInvalidText = errors.New("outbox: inbox: text is not valid UTF-8 or contains NUL")
	// ErrNilPayload reports a nil payload given to Enqueue; an
	// empty, non-nil payload is valid.
	ErrNilPayload = errors.New("outbox: inbox: payload is nil")
	// ErrPayloadTooLarge reports a payload over MaxPayloadBytes bytes.
	ErrPayloadTooLarge = errors.New("outbox: inbox: payload is too large")
	// ErrDueAtOutOfRange reports a Message.DueAt outside the years
	// core.MinTimeYear to core.MaxTimeYear (UTC), which every supported
	// database stores.
	ErrDueAtOutOfRange = errors.New("outbox: inbox: due time is out of range")
	// ErrHashTooLong reports a content hash over MaxHashLen bytes.
	ErrHashTooLong = errors.New("outbox: inbox: hash is too long")
	// ErrEmptyOwner reports an empty owner token (the zero token).
	ErrEmptyOwner = errors.New("outbox: inbox: owner token is empty")
	// ErrInvalidOwner reports an owner token over MaxOwnerLen bytes, or
	// not valid UTF-8, or holding a NUL byte.
	ErrInvalidOwner = errors.New("outbox: inbox: invalid owner token")
	// ErrInvalidLease reports a lease that is not positive.
	ErrInvalidLease = errors.New("outbox: inbox: lease must be positive")
	// ErrInvalidBatchSize reports a batch size that is not positive.
	ErrInvalidBatchSize = errors.New("outbox: inbox: batch size must be positive")
	// ErrInvalidDelay reports an abandon delay that is not positive.
	ErrInvalidDelay = errors.New("outbox: inbox: delay must be positive")
	// ErrInvalidRetention reports a cleanup retention that is not positive.
	ErrInvalidRetention = errors.New("outbox: inbox: retention must be positive")
)

// Runtime errors.
var (
	// ErrNotFound is returned by Get for an unknown (source, message id).
	ErrNotFound = errors.New("outbox: inbox: message not found")
	// ErrInProgress is returned by ProcessTx and Process when a
	// work-queue worker holds a live lease on the message: it is being
	// handled right now. Roll back; a later redelivery sees it Done, or
	// free again if the worker failed. The handler of that very message,
	// calling with its own ctx, does not get it.
	ErrInProgress = errors.New("outbox: inbox: message is being handled by a worker")
	// ErrContention reports lock contention (SQLite busy, MySQL deadlock
	// or lock wait timeout) in the caller's transaction: roll it back and
	// run it again. Process does that by itself.
	ErrContention = errors.New("outbox: inbox: lock contention; roll back and retry")
	// ErrNoHandler is recorded as the last error of a message whose topic
	// has no handler.
	ErrNoHandler = errors.New("outbox: inbox: no handler for topic")
	// ErrHandlerPanic wraps the value of a handler panic; the attempt
	// counts as failed.
	ErrHandlerPanic = errors.New("outbox: inbox: handler panicked")
	// ErrHandlerGoexit is recorded when a handler ends its goroutine with
	// runtime.Goexit instead of returning (t.FailNow, t.Fatal and
	// testify's require do): the attempt counts as failed, like a panic.
	ErrHandlerGoexit = errors.New("outbox: inbox: handler called runtime.Goexit")
	// ErrAttemptsExhausted is recorded as the last error of a message a
	// Dispatcher marks Dead without running its handler: every claim
	// charges an attempt, and the claim of its last attempt
	// (MaxAttempts) ended without an outcome, because the process
	// handling it died (a message that crashes its process, for example)
	// or its handler outlived the lease; or MaxAttempts was lowered below
	// the attempts already made.
	ErrAttemptsExhausted = errors.New("outbox: inbox: attempts used up")
	// ErrDuplicateHandler is returned by Dispatcher.Handle for a topic
	// that already has a handler.
	ErrDuplicateHandler = errors.New("outbox: inbox: topic already has a handler")
)

// ErrCloseInHandler is returned at once by Dispatcher.Close (and by
// tenant.Inbox.Close) called with the context of one of the dispatcher's
// handler calls, or a context derived from it, and by
// Dispatcher.RemoveInbox called that way for the handler's own inbox:
// they wait for the running handlers, the calling one among them, so they
// would wait for ever (or until ctx ends). Nothing is closed. Call them
// from another goroutine with a context of its own (context.Background,
// not one derived from the handler's): they return once the handler did.
var ErrCloseInHandler = errors.New("outbox: inbox: Close called from a handler of the dispatcher it closes; call it from another goroutine with a context of its own")

// errFnAbandoned is the error an InboxObserver is given when the business
// function of ProcessTx or Process panicked or called runtime.Goexit (the
// panic itself goes on to the caller).
var errFnAbandoned = errors.New("outbox: inbox: process: the business function panicked or called runtime.Goexit")
