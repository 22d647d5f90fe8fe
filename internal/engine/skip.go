package engine

import (
	"sync/atomic"
	"time"
)

// The skip of a source whose operations failed in a row (a database down
// or not answering), in a loop that serves several (the poller's stores,
// an inbox dispatcher's inboxes): its turns are skipped for MinSkip,
// doubling to MaxSkip, and for at least FailedShare times as long as the
// failed operation took (up to MaxSlowSkip), so that a source whose
// operations fail slowly takes a small share of the loop's time.
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

// Skip is the back-off of one source (see SkipFor). Its methods may be
// called from any goroutine: the loop that runs the source's operations,
// and a probe of the source running beside it.
type Skip struct {
	until    atomic.Int64 // Unix nanoseconds; 0: not skipped
	failures atomic.Int64 // failures in a row
	probing  atomic.Bool  // a probe of the source runs (Pass)
}

// Pass reports whether the loop passes the source's turn to the next
// source: while the source is skipped, while a probe of it runs, and once
// its skip ended after a failure. Then probe is called to start a probe
// beside the loop (an operation that tells whether the source answers
// again, whose outcome it records): it must call ended once the probe is
// over (at once if it starts none). A failed operation may take its whole
// timeout (a database that does not answer); tried in the loop, it held
// up every other source for that long at each try.
func (s *Skip) Pass(probe func(ended func())) bool {
	switch {
	case s.Skipping() || s.probing.Load():
		return true
	case !s.Failed():
		return false
	}
	s.probing.Store(true)
	probe(func() { s.probing.Store(false) })
	return true
}

// Record records the outcome of an operation that took took: after a
// failure the source is skipped for SkipFor; a success ends that.
func (s *Skip) Record(failed bool, took time.Duration) {
	if !failed {
		s.failures.Store(0)
		s.until.Store(0)
		return
	}
	n := s.failures.Add(1)
	s.until.Store(time.Now().Add(SkipFor(int(min(n, 1<<20)), took)).UnixNano())
}

// Skipping reports whether the source's turns are skipped now.
func (s *Skip) Skipping() bool { return time.Now().UnixNano() < s.until.Load() }

// Failed reports whether the source's last operation failed (its skip
// may have ended): the next one may take as long to fail.
func (s *Skip) Failed() bool { return s.failures.Load() > 0 }

// Clear ends the skip (the source proved it answers), keeping the count
// of failures: a failure after it skips as long as the next would have.
func (s *Skip) Clear() { s.until.Store(0) }
