package core

import (
	"encoding/json"
	"maps"
	"time"
)

// Builder assembles an [Envelope]. Setters never fail; [Builder.Build]
// validates everything at once. A Builder is not safe for concurrent use and
// may be reused: Build copies what it keeps.
type Builder struct {
	env      Envelope
	json     []byte
	bytes    []byte
	hasJSON  bool
	hasBytes bool
	nilBytes bool // PayloadBytes(nil): named in ErrNoPayload's message
	valueErr error
	delay    time.Duration
	ordered  bool
}

// NewEvent starts an envelope of the given event type name.
func NewEvent(eventType string) *Builder {
	return &Builder{env: Envelope{eventType: eventType}}
}

// NewEventOf starts an envelope of a type-safe event type. A nil type,
// or a nil value of one (a nil pointer, map or func: its Name is not
// called), fails validation with ErrEmptyEventType.
func NewEventOf(t EventType) *Builder {
	if isNil(t) {
		return NewEvent("")
	}
	return NewEvent(t.Name())
}

// JSONEvent is shorthand for NewEvent(eventType).PayloadJSONString(payload).Build().
func JSONEvent(eventType, payload string) (Envelope, error) {
	return NewEvent(eventType).PayloadJSONString(payload).Build()
}

// ID sets an explicit event id (at most MaxEventIDLen characters). Without
// it, or with "", Build assigns a ULID greater than every one it assigned
// before in the process, in any goroutine (when the wall clock steps
// back, the ids keep their last millisecond until it catches up).
func (b *Builder) ID(id string) *Builder { b.env.id = id; return b }

// OccurredAt sets when the event happened. Defaults to now. Stored in UTC
// with microsecond precision; Build fails with ErrTimeOutOfRange unless it
// falls within the years MinTimeYear to MaxTimeYear in UTC.
func (b *Builder) OccurredAt(t time.Time) *Builder { b.env.occurredAt = t; return b }

// NotBefore delays delivery: no listener sees the event before t. A time
// in the past means now; the zero time means no delay. Like OccurredAt, t
// must fall within the years MinTimeYear to MaxTimeYear in UTC
// (ErrTimeOutOfRange). It clears a Delay set earlier.
func (b *Builder) NotBefore(t time.Time) *Builder { b.env.notBefore, b.delay = t, 0; return b }

// Delay delays delivery by d from the moment Build runs, on the wall
// clock (time.Now); d <= 0 means now. With a clock of your own as the
// outbox's Config.Now, use NotBefore(now().Add(d)) instead: due times are
// judged by that clock.
// Even the longest Duration (about 292 years) stays within the years
// NotBefore takes. It clears a NotBefore set earlier.
func (b *Builder) Delay(d time.Duration) *Builder {
	b.delay, b.env.notBefore = d, time.Time{}
	return b
}

// AggregateType sets the aggregate type by name.
func (b *Builder) AggregateType(name string) *Builder { b.env.aggregateType = name; return b }

// AggregateTypeOf sets a type-safe aggregate type; nil, or a nil value
// of one (a nil pointer, map or func: its Name is not called), clears it.
func (b *Builder) AggregateTypeOf(t AggregateType) *Builder {
	if isNil(t) {
		return b.AggregateType("")
	}
	return b.AggregateType(t.Name())
}

// AggregateID sets the aggregate id.
func (b *Builder) AggregateID(id string) *Builder { b.env.aggregateID = id; return b }

// TenantID sets the pass-through tenant id.
func (b *Builder) TenantID(id string) *Builder { b.env.tenantID = id; return b }

// Header sets one header. Build fails with ErrInvalidHeader for an empty
// key or text that is not valid UTF-8 or holds NUL, ErrHeaderKeyTooLong
// for a key over MaxHeaderKeyLen characters and ErrHeadersTooLarge when
// the headers encode to more than MaxHeadersBytes of JSON.
func (b *Builder) Header(key, value string) *Builder {
	if b.env.headers == nil {
		b.env.headers = make(map[string]string, 4)
	}
	b.env.headers[key] = value
	return b
}

// Headers adds every entry of h (copied).
func (b *Builder) Headers(h map[string]string) *Builder {
	for k, v := range h {
		b.Header(k, v)
	}
	return b
}

// PayloadJSON sets a JSON payload (copied at Build).
func (b *Builder) PayloadJSON(doc []byte) *Builder {
	b.json, b.hasJSON, b.valueErr = doc, true, nil
	return b
}

// PayloadJSONString sets a JSON payload from a string.
func (b *Builder) PayloadJSONString(doc string) *Builder { return b.PayloadJSON([]byte(doc)) }

// PayloadValue sets a JSON payload by marshaling v with encoding/json. A
// marshal error is reported by Build as ErrInvalidJSON.
func (b *Builder) PayloadValue(v any) *Builder {
	doc, err := json.Marshal(v)
	b.PayloadJSON(doc)
	b.valueErr = err
	return b
}

// PayloadBytes sets an opaque bytes payload (copied at Build). An empty
// non-nil slice is a valid empty payload; nil counts as no payload: it
// clears an earlier PayloadBytes, leaves a JSON payload alone, and Build
// without one fails with ErrNoPayload.
func (b *Builder) PayloadBytes(p []byte) *Builder {
	b.bytes, b.hasBytes, b.nilBytes = p, p != nil, p == nil
	return b
}

// OrderKey delivers the event in order with the other events of key: for
// one key, listeners see the events in the order their transactions
// committed. See Ordered for the aggregate's key.
func (b *Builder) OrderKey(key string) *Builder {
	b.env.orderKey, b.ordered = key, true
	return b
}

// Ordered delivers the event in order with the other events of its
// aggregate (AggregateOrderKey of its type and id), unless OrderKey sets
// another key. Build fails with ErrNoOrderKey when the event has neither.
func (b *Builder) Ordered() *Builder {
	b.ordered = true
	return b
}

// OnDead sets what the event does to its key should it go DEAD: hold the
// key (BlockOnDead, the default) or release it (SkipOnDead). It matters
// for ordered events only: those its builder orders (Ordered, OrderKey)
// and those of a type an Ordering orders, where it overrides the
// Ordering's OnDead.
func (b *Builder) OnDead(p DeadPolicy) *Builder {
	b.env.onDead, b.env.onDeadSet = p, true
	return b
}

// Build validates and returns the immutable envelope. Errors are
// *ValidationError values wrapping the Err* sentinels of this package.
func (b *Builder) Build() (Envelope, error) {
	env := b.env
	switch {
	case b.hasJSON && b.hasBytes:
		return Envelope{}, invalid("payload", ErrBothPayloads, "")
	case b.valueErr != nil:
		return Envelope{}, &ValidationError{Field: "payload", Err: ErrInvalidJSON, Msg: "marshal: " + b.valueErr.Error()}
	case b.hasJSON:
		env.kind, env.payload = PayloadJSON, b.json
	case b.hasBytes:
		env.kind, env.payload = PayloadBytes, b.bytes
	case b.nilBytes:
		return Envelope{}, invalid("payload", ErrNoPayload, "nil bytes")
	default:
		return Envelope{}, invalid("payload", ErrNoPayload, "")
	}
	if env.id == "" {
		env.id = newID()
	}
	if env.occurredAt.IsZero() {
		env.occurredAt = time.Now()
	}
	env.occurredAt = env.occurredAt.UTC().Truncate(time.Microsecond)
	if b.delay > 0 {
		env.notBefore = time.Now().Add(b.delay)
	}
	if !env.notBefore.IsZero() {
		env.notBefore = env.notBefore.UTC().Truncate(time.Microsecond)
	}
	if err := validate(&env, true); err != nil {
		return Envelope{}, err
	}
	if err := checkLimits(&env); err != nil {
		return Envelope{}, err
	}
	if b.ordered {
		if env.orderKey == "" {
			if env.aggregateType == "" || env.aggregateID == "" {
				return Envelope{}, invalid("order_key", ErrNoOrderKey, "")
			}
			env.orderKey = AggregateOrderKey(env.aggregateType, env.aggregateID)
		}
		if err := checkOrder(env.orderKey, env.onDead); err != nil {
			return Envelope{}, err
		}
	} else if err := checkDeadPolicy(env.onDead); err != nil {
		// An Ordering may order the event at Publish: the policy is
		// refused here, where it was set.
		return Envelope{}, err
	}
	// Defensive copies: the caller keeps its slices and map.
	env.payload = append(make([]byte, 0, len(env.payload)), env.payload...)
	if env.headers != nil {
		env.headers = maps.Clone(env.headers)
		b.env.headers = nil // a reused builder must not share the map
		b.Headers(env.headers)
	}
	env.validated = true
	return env, nil
}
