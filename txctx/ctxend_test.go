package txctx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/txctx"
)

// A ctx that ends while Do waits for a connection returns an error
// wrapping ctx.Err(), and the ctx's own cause when it has one: with a
// cause it returned the cause alone (errors.Is(err,
// context.DeadlineExceeded) was false).
func TestDoWaitingForAConnectionWrapsCtxErrAndCause(t *testing.T) {
	db := openDB(t)
	db.SetMaxOpenConns(1)
	held, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	m := txctx.New(db)
	mine := errors.New("the request was abandoned")
	run := func(ctx context.Context) error {
		called := false
		err := m.Do(ctx, func(context.Context) error { called = true; return nil })
		if called {
			t.Error("fn ran although ctx ended before a connection was free")
		}
		return err
	}

	tctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, mine)
	defer cancel()
	if err := run(tctx); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, mine) {
		t.Errorf("Do with a timeout and a cause = %v, want DeadlineExceeded and the cause", err)
	}
	cctx, ccancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { ccancel(mine) })
	if err := run(cctx); !errors.Is(err, context.Canceled) || !errors.Is(err, mine) {
		t.Errorf("Do cancelled with a cause = %v, want Canceled and the cause", err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer pcancel()
	if err := run(pctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do with a timeout = %v, want DeadlineExceeded", err)
	}
}

// A nil ctx is refused before anything else, also by a Manager without a
// database.
func TestDoRefusesANilCtxFirst(t *testing.T) {
	var nilCtx context.Context
	fn := func(context.Context) error { return nil }
	for name, m := range map[string]*txctx.Manager{
		"New(nil)":          txctx.New(nil),
		"NewX(nil)":         txctx.NewX(nil),
		"NewX(&sqlx.DB{})":  txctx.NewX(&sqlx.DB{}),
		"a nil *Manager":    nil,
		"a working Manager": txctx.New(openDB(t)),
	} {
		if err := m.Do(nilCtx, fn); !errors.Is(err, core.ErrNilContext) {
			t.Errorf("%s: Do(nil ctx) = %v, want ErrNilContext", name, err)
		}
	}
}
