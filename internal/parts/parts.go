// Package parts gives this module's tools, demo and tests the parts an
// outbox.Outbox is wired from, which the Outbox itself keeps unexported:
// users work through the Outbox's methods, the module's own harnesses
// sometimes need to drive one part directly (a poll, a lease).
package parts

import (
	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/publish"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/txctx"
)

// Parts are the parts of one outbox.Outbox.
type Parts struct {
	// Store is the SQL store.
	Store *jdbcstore.Store
	// Dispatcher runs the listeners.
	Dispatcher *dispatcher.Dispatcher
	// Poller is the fallback scan; nil when the poller is disabled.
	Poller *poller.Poller
	// Cleaner is the retention purge; nil unless cleanup is enabled.
	Cleaner *cleanup.Cleaner
	// Client publishes envelopes.
	Client *publish.Client
	// Tx is the transaction manager.
	Tx *txctx.Manager
}

// Outbox returns the parts of ob, an *outbox.Outbox. Package outbox sets
// it when it is initialized; any other argument panics.
var Outbox func(ob any) Parts
