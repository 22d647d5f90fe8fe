package engine

import (
	"time"

	"github.com/outbox-go/outbox/retry"
)

// Outcome is what an attempt of a claimed item becomes.
type Outcome uint8

const (
	// Done: the attempt succeeded.
	Done Outcome = iota
	// Retry: the attempt failed; try again after the delay.
	Retry
	// Dead: the last allowed attempt failed; never try again.
	Dead
)

// Decide returns the outcome of an attempt that ended with err, attempts
// being the number of failed attempts including this one: Done when err
// is nil, Dead once attempts reaches maxAttempts, else Retry after the
// policy's delay for attempts (a negative delay counts as 0).
func Decide(err error, attempts, maxAttempts int, policy retry.Policy) (Outcome, time.Duration) {
	switch {
	case err == nil:
		return Done, 0
	case attempts >= maxAttempts:
		return Dead, 0
	}
	return Retry, max(0, policy.Delay(attempts))
}
