package cleanup

import "time"

// SetRand sets the source of the random fractions, in [0, 1), that place
// the runs of a started cleaner.
func SetRand(c *Cleaner, f func() float64) { c.rand = f }

// Delays returns the wait before a started cleaner's first run and the
// one after a run, drawn from its random source.
func Delays(c *Cleaner) (first, next time.Duration) { return c.firstDelay(), c.nextDelay() }
