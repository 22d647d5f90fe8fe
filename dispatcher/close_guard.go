package dispatcher

import (
	"context"
	"errors"
)

// ErrCloseInListener is returned at once by Close (of the dispatcher, of an
// outbox.Outbox and of a tenant.Outbox) called with the context of one of the dispatcher's
// listener calls, or a context derived from it: Close waits for the
// workers, the calling listener's among them, so it would wait for ever
// (or until ctx ends). Nothing is closed. Call Close from another
// goroutine with a context of its own (context.Background, not one
// derived from the listener's), e.g. go ob.Close(context.Background()): it
// returns once the listener did. RemoveStore returns it too, called that
// way for the store of the listener's own event. A context derived from a
// listener's is recognized as such for good, context.WithoutCancel's
// included, also after that listener returned (a context kept for its
// values, say): give Close a context of its own.
var ErrCloseInListener = errors.New("outbox: Close called from a listener of the dispatcher it closes; call it from another goroutine with a context of its own")

// listenerKey marks the contexts of listener calls; its value is the
// dispatcher making them.
type listenerKey struct{}

// markListenerContexts makes every context given to d's listeners carry
// d: they all derive from runCtx.
func (d *Dispatcher) markListenerContexts() {
	d.runCtx = context.WithValue(d.runCtx, listenerKey{}, d)
}

// InListener reports whether ctx is the context of a listener call of d,
// or derived from one. Close returns ErrCloseInListener for such a ctx;
// a type that closes other parts before d (as outbox.Outbox does its
// poller) checks it first, so that it closes nothing either. A context not
// derived from the listener's cannot be recognized: Close with it, from
// the listener's own goroutine, waits until it ends.
func (d *Dispatcher) InListener(ctx context.Context) bool {
	return ctx != nil && ctx.Value(listenerKey{}) == d
}

// InListenerOf reports whether ctx is the context of a listener call of
// d for an event of the store added as id, or derived from one: RemoveStore
// returns ErrCloseInListener for such a ctx, and a type that stops other
// parts of the store first (as package tenant does its poller) checks it
// before.
func (d *Dispatcher) InListenerOf(ctx context.Context, id string) bool {
	if !d.InListener(ctx) {
		return false
	}
	o, ok := ctx.Value(originKey{}).(*origin)
	return ok && o.id == id
}
