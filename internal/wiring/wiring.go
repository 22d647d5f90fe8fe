// Package wiring holds what the wiring packages (outbox, tenant) and the
// multi-store parts (dispatcher, poller) share to hand Logger and Metrics
// down to their parts.
package wiring

import (
	"log/slog"

	"github.com/outbox-go/outbox/core"
)

// Inherit sets *logger to l and *metrics to m where they are nil: how a
// wiring package (outbox.New, tenant.New) passes its Logger and Metrics
// down to the parts' configurations.
func Inherit(logger **slog.Logger, metrics *core.Metrics, l *slog.Logger, m core.Metrics) {
	if *logger == nil {
		*logger = l
	}
	if *metrics == nil {
		*metrics = m
	}
}

// MetricsForStore returns m.ForStore(storeID) when m implements
// core.StoreMetrics and storeID is not empty, else m.
func MetricsForStore(m core.Metrics, storeID string) core.Metrics {
	if sm, ok := m.(core.StoreMetrics); ok && storeID != "" {
		if scoped := sm.ForStore(storeID); scoped != nil {
			return scoped
		}
	}
	return m
}
