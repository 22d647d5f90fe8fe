package core

import (
	"errors"
	"time"
)

// ErrUnavailable matches (with errors.Is) every error made by [Unavailable].
// Only an [*UnavailableError] puts an event off: an error that merely wraps
// ErrUnavailable (fmt.Errorf("...: %w", ErrUnavailable)) is an ordinary
// failure, charged as an attempt.
var ErrUnavailable = errors.New("outbox: downstream unavailable")

// UnavailableError is a listener failure that is not the event's fault:
// the broker or service the listener forwards to cannot be reached. The
// dispatcher does not count it as a failed attempt: it puts the event off
// until After from now (its status and attempts unchanged, its lease
// released), so an outage never drives events to DEAD. The event then
// comes back through the poller, which the dispatcher wakes when it is
// due (up to 256 due times remembered per store; later ones wait for the
// poller's Interval). Make one with [Unavailable].
type UnavailableError struct {
	// Err is the cause, e.g. the broker client's connection error.
	Err error
	// After is how long to put the event off; zero or negative means the
	// dispatcher's first retry delay (its retry policy's Delay(1)).
	After time.Duration
}

// Unavailable wraps err, a failure to reach the listener's downstream, so
// the dispatcher puts the event off for after without charging an attempt.
// Return it only when the event itself is not the problem (a refused
// connection, a broker that does not answer): an error the downstream
// returns for this event (a rejected message) must stay a normal failure,
// which is retried and ends DEAD after MaxAttempts. Relays use it while
// their broker is down.
//
// Unavailable(nil, d) returns an error too: its message says only that
// the downstream is unavailable.
func Unavailable(err error, after time.Duration) error {
	return &UnavailableError{Err: err, After: after}
}

// Error implements error.
func (e *UnavailableError) Error() string {
	if e == nil || e.Err == nil {
		return ErrUnavailable.Error()
	}
	return ErrUnavailable.Error() + ": " + e.Err.Error()
}

// Unwrap returns ErrUnavailable and the cause, for errors.Is and errors.As.
func (e *UnavailableError) Unwrap() []error {
	if e == nil || e.Err == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.Err}
}
