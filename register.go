package outbox

import (
	"context"
)

// Register adds l for the event type name; listeners of one type run in
// registration order, then the wildcard ones (RegisterAll). They make one
// delivery: the first that fails or puts the event off ends the run, and
// the retry runs them all again (those before it see the event again; an
// event that goes DEAD never reaches those after it). It returns o for chaining and panics only on
// programmer errors: an empty type, the wildcard "*" (use RegisterAll), a
// type no event can have (core.CheckEventType) or a nil listener (see
// TryRegister).
// Registering after Start is allowed and takes effect at once.
func (o *Outbox) Register(eventType string, l Listener) *Outbox {
	o.reg.Register(eventType, l)
	return o
}

// RegisterFunc is Register with a function listener.
func (o *Outbox) RegisterFunc(eventType string, fn func(ctx context.Context, env Envelope) error) *Outbox {
	o.reg.RegisterFunc(eventType, fn)
	return o
}

// RegisterType is Register with a type-safe event type.
func (o *Outbox) RegisterType(t EventType, l Listener) *Outbox {
	o.reg.RegisterType(t, l)
	return o
}

// RegisterAll adds a listener of every event type; it runs after the
// listeners of the event's own type.
func (o *Outbox) RegisterAll(l Listener) *Outbox {
	o.reg.RegisterAll(l)
	return o
}

// RegisterAllFunc is RegisterAll with a function listener.
func (o *Outbox) RegisterAllFunc(fn func(ctx context.Context, env Envelope) error) *Outbox {
	o.reg.RegisterAllFunc(fn)
	return o
}

// TryRegister is Register returning an error wrapping
// core.ErrInvalidConfig instead of panicking, for listeners configured
// from data.
func (o *Outbox) TryRegister(eventType string, l Listener) error {
	return o.reg.TryRegister(eventType, l)
}
