// Package wiring holds what the wiring packages (outbox, tenant) share to
// build their parts' configurations.
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
