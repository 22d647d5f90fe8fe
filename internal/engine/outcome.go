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
// policy's delay for attempts (see Delay).
func Decide(err error, attempts, maxAttempts int, policy retry.Policy) (Outcome, time.Duration) {
	switch {
	case err == nil:
		return Done, 0
	case attempts >= maxAttempts:
		return Dead, 0
	}
	return Retry, Delay(policy, attempts)
}

// Delay returns policy's delay for attempts, 0 for a negative one. A
// policy that panics (a user's policy with a bug) gets the default
// policy's delay instead of killing the worker, and the process with it.
func Delay(policy retry.Policy, attempts int) (d time.Duration) {
	defer func() {
		if recover() != nil {
			d = retry.Exponential{}.Delay(attempts)
		}
	}()
	return max(0, policy.Delay(attempts))
}
