package inbox_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
)

// RunOnce handles its batch one message after another under one lease.
// Each handler here takes its whole HandlerTimeout (on the inbox's test
// clock, so the run is deterministic), and another dispatcher claims
// whatever is claimable as soon as the lease has run out. RunOnce must
// check before each handler that the lease still covers a handler and its
// outcome, and hand the rest back otherwise: it used to run the third
// message with 20 s of lease left, then the fourth and fifth after the
// lease had expired and the other dispatcher had handled them.
func TestRunOnceStopsWhenTheLeaseNoLongerCovers(t *testing.T) {
	const (
		lease          = time.Minute
		handlerTimeout = 20 * time.Second
		statusTimeout  = 10 * time.Second
	)
	cfg := func(owner string) inbox.DispatcherConfig {
		return inbox.DispatcherConfig{Owner: owner, BatchSize: 5, Lease: lease, HandlerTimeout: handlerTimeout,
			StatusTimeout: statusTimeout, ReapInterval: -1, CleanupInterval: -1}
	}
	e := newEnv(t, openSQLite, inbox.Config{})
	runs := map[string][]string{} // message id -> owners that handled it, in order
	tool, other := e.dispatcher(cfg("tool")), e.dispatcher(cfg("other"))
	otherRan := 0
	mustHandle(t, tool, "topic", func(_ context.Context, m inbox.Record) error {
		runs[m.MessageID] = append(runs[m.MessageID], "tool")
		if e.clock.Advance(handlerTimeout).After(m.LockedUntil) {
			n, err := other.RunOnce(e.ctx)
			if err != nil {
				t.Errorf("the other dispatcher's RunOnce: %v", err)
			}
			otherRan += n
		}
		return nil
	})
	mustHandle(t, other, "topic", func(_ context.Context, m inbox.Record) error {
		runs[m.MessageID] = append(runs[m.MessageID], "other")
		return nil
	})
	for i := range 5 {
		e.enqueue(inbox.Message{Source: "s", MessageID: fmt.Sprint(i)})
	}
	// 0 starts with 60 s of lease left, 1 with 40 s, 2 would with 20 s:
	// fewer than HandlerTimeout + StatusTimeout.
	if n, err := tool.RunOnce(e.ctx); err != nil || n != 2 {
		t.Errorf("RunOnce = %d, %v; want 2 handled", n, err)
	}
	mustEqual(t, "handled by the other dispatcher meanwhile", otherRan, 0)
	for i := 2; i < 5; i++ {
		id := fmt.Sprint(i)
		rec := e.get("s", id)
		mustEqual(t, id+" status", rec.Status, inbox.StatusProcessing)
		mustEqual(t, id+" released", rec.LockedBy, "")
		mustEqual(t, id+" attempt", rec.Attempt, 0)
	}
	mustEqual(t, "release logged", e.logs.Count("level=INFO", "released=3"), 1)
	// The messages given back are claimable at once, by any dispatcher.
	if n, err := other.RunOnce(e.ctx); err != nil || n != 3 {
		t.Errorf("the other dispatcher's RunOnce = %d, %v; want 3", n, err)
	}
	for i := range 5 {
		id := fmt.Sprint(i)
		want := "tool"
		if i >= 2 {
			want = "other"
		}
		mustEqual(t, id+" handled by", strings.Join(runs[id], ","), want)
		mustEqual(t, id+" status", e.get("s", id).Status, inbox.StatusDone)
	}
	mustEqual(t, "lease lost warnings", e.logs.Count("lease lost"), 0)
}

// A handler of RunOnce's batch that calls runtime.Goexit ends the calling
// goroutine: its failed attempt is recorded, and the messages after it,
// which never ran, are handed back with the attempts their claim charged,
// claimable at once. They used to stay leased until the lease expired.
func TestRunOnceGoexitReleasesTheRest(t *testing.T) {
	e := newEnv(t, openSQLite, inbox.Config{})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "tool", BatchSize: 3, ReapInterval: -1, CleanupInterval: -1})
	mustHandle(t, d, "topic", func(context.Context, inbox.Record) error { runtime.Goexit(); return nil })
	for i := range 3 {
		e.enqueue(inbox.Message{Source: "s", MessageID: fmt.Sprint(i)})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = d.RunOnce(e.ctx)
		t.Error("RunOnce returned; the handler's Goexit should have ended its goroutine")
	}()
	receive(e, "RunOnce's goroutine to end", done)
	rec := e.get("s", "0")
	mustEqual(t, "0 error", rec.LastError, inbox.ErrHandlerGoexit.Error())
	mustEqual(t, "0 attempt", rec.Attempt, 1)
	for _, id := range []string{"1", "2"} {
		rec := e.get("s", id)
		mustEqual(t, id+" status", rec.Status, inbox.StatusProcessing)
		mustEqual(t, id+" released", rec.LockedBy, "")
		mustEqual(t, id+" attempt", rec.Attempt, 0)
	}
	mustEqual(t, "release logged", e.logs.Count("level=INFO", "Goexit", "released=2"), 1)
}
