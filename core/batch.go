package core

import "fmt"

// BatchError is the error of one event of a batch (outbox.PublishAll,
// BatchInserter.InsertBatch): Index is its position in the batch, ID its
// event id ("" when the envelope has none, such as a zero Envelope), Err
// the cause (a *ValidationError, an error wrapping ErrDuplicateEvent, …),
// which errors.Is and errors.As see through it.
type BatchError struct {
	Index int
	ID    string
	Err   error
}

// Error names the event and its cause.
func (e *BatchError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("event %d of the batch: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("event %d (%s) of the batch: %v", e.Index, e.ID, e.Err)
}

// Unwrap returns the cause.
func (e *BatchError) Unwrap() error { return e.Err }
