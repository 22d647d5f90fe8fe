package outbox

import "github.com/outbox-go/outbox/core"

// Aliases of the core types most programs need, so that a program using
// the root package rarely has to import core.
type (
	// Envelope is core.Envelope.
	Envelope = core.Envelope
	// Listener is core.Listener.
	Listener = core.Listener
	// ListenerFunc is core.ListenerFunc.
	ListenerFunc = core.ListenerFunc
	// EventType is core.EventType.
	EventType = core.EventType
	// AggregateType is core.AggregateType.
	AggregateType = core.AggregateType
	// Status is core.Status.
	Status = core.Status
)

// Builders of envelopes (see core).
var (
	// NewEvent is core.NewEvent.
	NewEvent = core.NewEvent
	// NewEventOf is core.NewEventOf.
	NewEventOf = core.NewEventOf
	// JSONEvent is core.JSONEvent.
	JSONEvent = core.JSONEvent
)
