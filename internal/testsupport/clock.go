package testsupport

import (
	"sync"
	"time"
)

// Epoch is the default start of a [Clock]: a fixed instant, far from any
// real one, so a test that reads the wall clock by mistake stands out.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a settable clock safe for concurrent use; pass its Now method
// wherever a component takes a clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
