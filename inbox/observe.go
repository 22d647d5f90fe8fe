package inbox

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/ratelog"
)

// observeInbox starts the observation of one processing by obs, guarded
// as the outbox's dispatcher guards its Observer (engine.Observe): a
// panic of ProcessInbox or of the end it returned is a fault of the
// observation only, logged (at most once per 5 s, counting the others),
// and the processing goes on unobserved; a nil context from it is ctx, a
// nil end none.
func observeInbox(ctx context.Context, obs core.InboxObserver, msg core.InboxMessage, log *slog.Logger, limit *ratelog.Limiter) (context.Context, func(core.InboxResult)) {
	return engine.Observe(ctx, func(ctx context.Context) (context.Context, func(core.InboxResult)) {
		return obs.ProcessInbox(ctx, msg)
	}, func(v any) {
		limit.Hit(log, slog.LevelError, "inbox: observer panicked; the processing goes on unobserved",
			slog.String("source", msg.Source), slog.String("message_id", msg.MessageID), slog.String("panic", fmt.Sprint(v)))
	})
}
