package inbox

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ratelog"
)

// observeInbox starts the observation of one processing by obs, guarded
// as the outbox's dispatcher guards its Observer: a panic of ProcessInbox
// or of the end it returned is a fault of the observation only, logged
// (at most once per 5 s, counting the others) and not passed on; the
// processing goes on unobserved. A nil context from it is ctx; a nil end
// is none. The end returned is never nil.
func observeInbox(ctx context.Context, obs core.InboxObserver, msg core.InboxMessage, log *slog.Logger, limit *ratelog.Limiter) (context.Context, func(core.InboxResult)) {
	panicked := func(v any) {
		limit.Hit(log, slog.LevelError, "inbox: observer panicked; the processing goes on unobserved",
			slog.String("source", msg.Source), slog.String("message_id", msg.MessageID), slog.String("panic", fmt.Sprint(v)))
	}
	octx, end := func() (octx context.Context, end func(core.InboxResult)) {
		defer func() {
			if v := recover(); v != nil {
				panicked(v)
				octx, end = nil, nil
			}
		}()
		return obs.ProcessInbox(ctx, msg)
	}()
	if octx == nil {
		octx = ctx
	}
	if end == nil {
		return octx, func(core.InboxResult) {}
	}
	return octx, func(r core.InboxResult) {
		defer func() {
			if v := recover(); v != nil {
				panicked(v)
			}
		}()
		end(r)
	}
}
