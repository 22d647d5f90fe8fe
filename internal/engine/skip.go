package engine

import "time"

// The skip of a source whose operations failed in a row (a database down
// or not answering), in a loop that serves several (the poller's stores,
// an inbox dispatcher's inboxes): its turns are skipped for
// MinSkip, doubling to MaxSkip, and for at least FailedShare times as
// long as the failed operation took (up to MaxSlowSkip), so that a
// source whose operations fail slowly takes a small share of the loop's
// time.
const (
	MinSkip     = time.Second
	MaxSkip     = 30 * time.Second
	FailedShare = 4
	MaxSlowSkip = 5 * time.Minute
)

// SkipFor returns how long to skip a source after its failures-th failure
// in a row (1 for the first), which took took.
func SkipFor(failures int, took time.Duration) time.Duration {
	wait := MaxSkip
	if shift := failures - 1; shift >= 0 && shift < 5 {
		wait = min(MinSkip<<shift, MaxSkip)
	}
	return max(wait, min(FailedShare*took, MaxSlowSkip))
}
