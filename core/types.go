package core

import (
	"fmt"
	"reflect"
)

// EventType names a kind of event in a type-safe way. Implement it on a
// string type to get enum-like constants:
//
//	type UserEvent string
//	func (e UserEvent) Name() string { return string(e) }
//	const UserCreated UserEvent = "UserCreated"
type EventType interface {
	Name() string
}

// AggregateType names a kind of aggregate in a type-safe way, like [EventType].
type AggregateType interface {
	Name() string
}

// isNil reports whether v is nil or holds a nil pointer, map, func, chan,
// slice or interface: calling Name on such a value would most likely
// panic, and the builder's setters never fail.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// StringEventType is the dynamic [EventType]: StringEventType("OrderPaid").
type StringEventType string

// Name returns the string itself.
func (t StringEventType) Name() string { return string(t) }

// StringAggregateType is the dynamic [AggregateType].
type StringAggregateType string

// Name returns the string itself.
func (t StringAggregateType) Name() string { return string(t) }

// Status is the processing state of a stored event. The numeric values are
// stored in the status column and are part of the public contract.
type Status int8

// The stored status values.
const (
	StatusNew   Status = 0 // inserted, awaiting processing
	StatusDone  Status = 1 // all listeners succeeded
	StatusRetry Status = 2 // failed, scheduled for another attempt
	StatusDead  Status = 3 // failed MaxAttempts times; needs an operator
)

// String returns NEW, DONE, RETRY, DEAD or Status(n).
func (s Status) String() string {
	switch s {
	case StatusNew:
		return "NEW"
	case StatusDone:
		return "DONE"
	case StatusRetry:
		return "RETRY"
	case StatusDead:
		return "DEAD"
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// Valid reports whether s is one of the four defined statuses.
func (s Status) Valid() bool { return s >= StatusNew && s <= StatusDead }

// PayloadKind tells how an envelope's payload is to be read.
type PayloadKind uint8

// The payload kinds. The values are stored and are part of the contract.
const (
	PayloadJSON  PayloadKind = 0 // a JSON document
	PayloadBytes PayloadKind = 1 // opaque bytes
)

// String returns "json", "bytes", or PayloadKind(n) for another value.
func (k PayloadKind) String() string {
	switch k {
	case PayloadJSON:
		return "json"
	case PayloadBytes:
		return "bytes"
	}
	return fmt.Sprintf("PayloadKind(%d)", uint8(k))
}
