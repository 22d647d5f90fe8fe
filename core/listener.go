package core

import "context"

// Listener reacts to an event: publish to a broker, update a cache, call an
// API. It runs synchronously on a dispatcher worker; returning an error (or
// panicking) fails the delivery and schedules a retry. Delivery is at least
// once, so a listener must tolerate seeing the same [Envelope.ID] again.
type Listener interface {
	OnEvent(ctx context.Context, env Envelope) error
}

// ListenerFunc adapts a function to [Listener].
type ListenerFunc func(ctx context.Context, env Envelope) error

// OnEvent calls f.
func (f ListenerFunc) OnEvent(ctx context.Context, env Envelope) error { return f(ctx, env) }

// ListenerSource returns the listeners for an event type, in the order they
// must run. The returned slice must not be modified.
type ListenerSource interface {
	ListenersFor(eventType string) []Listener
}
