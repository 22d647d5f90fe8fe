package inbox_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// faultyObserver is a core.InboxObserver with one fault: "panic" panics
// in ProcessInbox, "nilctx" returns a nil context, "nilend" a nil end,
// "endpanic" an end that panics.
type faultyObserver struct{ fault string }

func (o faultyObserver) ProcessInbox(ctx context.Context, _ core.InboxMessage) (context.Context, func(core.InboxResult)) {
	switch o.fault {
	case "panic":
		panic("observer bug")
	case "nilctx":
		return nil, func(core.InboxResult) {} // the fault under test: a nil context
	case "nilend":
		return ctx, nil
	}
	return ctx, func(core.InboxResult) { panic("observer end bug") }
}

// An InboxObserver's faults are the observation's only, as the outbox's
// Observer's are: a panic in ProcessInbox or in its end is logged and not
// passed on, a nil context is the processing's own, a nil end none; the
// message is processed, in both modes. Each of them crashed the process
// from a dispatcher's worker, or panicked into Process's caller after its
// transaction had committed.
func TestInboxObserverFaultsAreSurvived(t *testing.T) {
	for _, fault := range []string{"panic", "nilctx", "nilend", "endpanic"} {
		t.Run(fault, func(t *testing.T) {
			e := newEnv(t, openSQLite, inbox.Config{Observer: faultyObserver{fault}})
			p, err := e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "tx"}, func(context.Context, *sqlx.Tx) error { return nil })
			if err != nil || !p {
				t.Fatalf("Process = %v, %v; want processed", p, err)
			}
			d := e.dispatcher(inbox.DispatcherConfig{Owner: "w"})
			mustHandle(t, d, "t", func(context.Context, inbox.Record) error { return nil })
			e.enqueue(inbox.Message{Source: "s", MessageID: "queued", Topic: "t"})
			if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
				t.Fatalf("RunOnce = %d, %v", n, err)
			}
			mustEqual(t, "queued status", e.status("s", "queued"), inbox.StatusDone)
			if fault == "panic" || fault == "endpanic" {
				if n := e.logs.Count("level=ERROR", "observer panicked"); n < 1 {
					t.Errorf("the observer's panic was not logged:\n%s", e.logs)
				}
			}
		})
	}
}
