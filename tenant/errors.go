package tenant

import (
	"errors"
	"fmt"
)

// ErrUnknownKey is wrapped by the router's error for a routing key that
// names no database: see [UnknownKeyError].
var ErrUnknownKey = errors.New("outbox: unknown routing key")

// ErrInvalidKey is returned for an empty routing key.
var ErrInvalidKey = errors.New("outbox: routing key must not be empty")

// UnknownKeyError is the router's error for a key that maps to no store.
// It wraps ErrUnknownKey.
type UnknownKeyError struct {
	Key     string // the routing key asked for
	StoreID string // the store id it maps to (equal to Key unless Config.Route maps it)
}

// Error names the key, and the store id it mapped to when they differ.
func (e *UnknownKeyError) Error() string {
	if e.StoreID != e.Key {
		return fmt.Sprintf("outbox: no database for routing key %q (store %q)", e.Key, e.StoreID)
	}
	return fmt.Sprintf("outbox: no database for routing key %q", e.Key)
}

// Unwrap returns ErrUnknownKey.
func (e *UnknownKeyError) Unwrap() error { return ErrUnknownKey }
