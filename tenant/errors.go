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

// ErrRemoveInTx is wrapped by the error of SetDatabases or Refresh
// asked, with the context of a transaction on a database it would remove
// or replace (begun by [Tenant.InTx] or adopted with [Tenant.Adopt]), to
// take that database out: the removal would wait for the transaction, so
// for its caller. That database stays in the set, open and served, and
// the rest of the set applies; remove it once the transaction has ended,
// or from another goroutine.
var ErrRemoveInTx = errors.New("outbox: a database cannot be removed from inside one of its own transactions")

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
