package ctxerr_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
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

// A Commit that failed because database/sql rolled the transaction back
// when its context ended says so, with the context's error; other errors
// and ErrTxDone of a live context are kept.
func TestOfCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if err := ctxerr.OfCommit(ctx, sql.ErrTxDone); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sql.ErrTxDone) ||
		!strings.Contains(err.Error(), "rolled back") {
		t.Errorf("OfCommit(ended ctx, ErrTxDone) = %v, want the deadline, saying the transaction was rolled back", err)
	}
	if err := ctxerr.OfCommit(context.Background(), sql.ErrTxDone); err != sql.ErrTxDone {
		t.Errorf("OfCommit(live ctx, ErrTxDone) = %v, want ErrTxDone itself", err)
	}
	other := errors.New("disk full")
	if err := ctxerr.OfCommit(ctx, other); err != other {
		t.Errorf("OfCommit(ended ctx, other) = %v, want the error itself", err)
	}
	if err := ctxerr.OfCommit(ctx, nil); err != nil {
		t.Errorf("OfCommit(ended ctx, nil) = %v, want nil", err)
	}
}
