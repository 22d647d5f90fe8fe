package ctxerr_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/ctxerr"
)

func TestOf(t *testing.T) {
	if err := ctxerr.Of(context.Background()); err != nil {
		t.Errorf("Of(live ctx) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ctxerr.Of(ctx); err != context.Canceled {
		t.Errorf("Of(cancelled) = %v, want context.Canceled itself", err)
	}
	mine := errors.New("mine")
	cctx, ccancel := context.WithCancelCause(context.Background())
	ccancel(mine)
	if err := ctxerr.Of(cctx); !errors.Is(err, context.Canceled) || !errors.Is(err, mine) {
		t.Errorf("Of(cancelled with a cause) = %v, want both Canceled and the cause", err)
	}
	tctx, tcancel := context.WithTimeoutCause(context.Background(), time.Nanosecond, mine)
	defer tcancel()
	<-tctx.Done()
	if err := ctxerr.Of(tctx); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, mine) {
		t.Errorf("Of(timed out with a cause) = %v, want both DeadlineExceeded and the cause", err)
	}
}
