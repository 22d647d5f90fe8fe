package relaytest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

// Expiring is a context whose deadline the test ends with Expire: its Err
// is then context.DeadlineExceeded, as when a listener's deadline passes.
type Expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

// NewExpiring returns an Expiring context that has not expired.
func NewExpiring() *Expiring {
	return &Expiring{Context: context.Background(), done: make(chan struct{})}
}

// Expire ends the context as its deadline would; later calls do nothing.
func (c *Expiring) Expire() { c.once.Do(func() { close(c.done) }) }

// Done is closed by Expire.
func (c *Expiring) Done() <-chan struct{} { return c.done }

// Deadline reports none: only Expire ends the context.
func (c *Expiring) Deadline() (time.Time, bool) { return time.Time{}, false }

// Err is context.DeadlineExceeded once Expire was called, nil before.
func (c *Expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// WantPutOff waits up to 30 s for the result of a relay's OnEvent (what
// names it) and fails t unless the event was put off: a
// *core.UnavailableError wrapping cause.
func WantPutOff(t testing.TB, what string, res <-chan error, cause error) {
	t.Helper()
	select {
	case err := <-res:
		var ue *core.UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, cause) {
			t.Errorf("%s = %v, want a core.Unavailable error wrapping %v", what, err, cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running", what)
	}
}
