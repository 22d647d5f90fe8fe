package ratelog

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Incident logs an operation that fails again and again once per
// incident: the first failure at WARN, the ones after it at DEBUG, and
// the first success after them at INFO. The zero value is ready; it is
// safe for concurrent use.
type Incident struct{ failing atomic.Bool }

// Report logs the outcome of one run of the operation: err (nil for a
// success) with failed when an incident begins, again while it goes on,
// and recovered when it ends.
func (i *Incident) Report(log *slog.Logger, err error, failed, again, recovered string) {
	switch {
	case err != nil && i.failing.CompareAndSwap(false, true):
		log.LogAttrs(context.Background(), slog.LevelWarn, failed, slog.String("error", err.Error()))
	case err != nil:
		log.LogAttrs(context.Background(), slog.LevelDebug, again, slog.String("error", err.Error()))
	case i.failing.CompareAndSwap(true, false):
		log.LogAttrs(context.Background(), slog.LevelInfo, recovered)
	}
}
