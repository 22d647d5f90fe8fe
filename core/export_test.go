package core

import "time"

// Unvalidated returns a copy of e whose cached "already validated" mark is
// cleared, so that e.Validate() runs every rule again. Envelopes from
// Builder.Build and Record.Envelope carry the mark; tests and benchmarks use
// this to measure and exercise the full validation path.
func Unvalidated(e Envelope) Envelope {
	e.validated = false
	return e
}

// SetIDClock makes the default ids read f instead of time.Now until the
// returned restore runs.
func SetIDClock(f func() time.Time) (restore func()) {
	ids.Lock()
	defer ids.Unlock()
	old := ids.now
	ids.now = f
	return func() {
		ids.Lock()
		defer ids.Unlock()
		ids.now = old
	}
}
