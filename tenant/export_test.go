package tenant

import "time"

// SetDiscoverTimeout sets the bound of the periodic discoveries of the
// sets started from then on and returns the function that restores it.
// Tests using it must not run in parallel.
func SetDiscoverTimeout(d time.Duration) (restore func()) {
	old := discoverTimeout
	discoverTimeout = d
	return func() { discoverTimeout = old }
}
