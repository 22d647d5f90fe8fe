package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// runObserver numbers the handlings of a dispatcher (0, 1, …), hands the
// number to the handler through its ctx and reports on ended when each
// handling's outcome was written.
type runObserver struct {
	next  chan int // the number of the next handling
	ended chan int
}

type runKey struct{}

func newRunObserver() *runObserver {
	o := &runObserver{next: make(chan int, 1), ended: make(chan int, 8)}
	o.next <- 0
	return o
}

func (o *runObserver) ProcessInbox(ctx context.Context, _ core.InboxMessage) (context.Context, func(core.InboxResult)) {
	i := <-o.next
	o.next <- i + 1
	return context.WithValue(ctx, runKey{}, i), func(core.InboxResult) { o.ended <- i }
}

// receive returns the next value of ch, failing the test at the env's
// deadline.
func receive[T any](e *env, what string, ch <-chan T) T {
	e.t.Helper()
	select {
	case v := <-ch:
		return v
	case <-e.ctx.Done():
		e.t.Fatalf("%s: %v", what, e.ctx.Err())
		panic("unreachable")
	}
}

// A handler that ignores its ctx outlives its lease; the same dispatcher
// (same owner) claims the message again and runs a second handling. The
// first, stale handling then finishes: its outcome (Done, a retry, a Done
// mark through Process) must change nothing, and the second handling's
// outcome stands. The fence used to be the owner alone, which both claims
// share, so the stale outcome was taken for the current claim's.
func testStaleClaimOutcome(t *testing.T, open opener) {
	type step func(ctx context.Context, e *env, rec inbox.Record) error
	succeed := func(context.Context, *env, inbox.Record) error { return nil }
	fail := func(msg string) step {
		return func(context.Context, *env, inbox.Record) error { return errors.New(msg) }
	}
	process := func(ctx context.Context, e *env, rec inbox.Record) error { // the effect and the Done mark in one transaction
		p, err := e.in.Process(ctx, inbox.Message{Source: rec.Source, MessageID: rec.MessageID}, func(context.Context, *sqlx.Tx) error { return nil })
		if err == nil && !p {
			err = errors.New("skipped as a redelivery")
		}
		return err
	}
	for _, c := range []struct {
		name          string
		stale, second step
		check         func(t *testing.T, e *env, rec inbox.Record, staleErr error)
	}{
		{"stale Done, failing second", succeed, fail("second failed"), func(t *testing.T, e *env, rec inbox.Record, _ error) {
			mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
			mustEqual(t, "last error", rec.LastError, "second failed")
			mustEqual(t, "lease", rec.LockedBy, "")
		}},
		{"stale retry, succeeding second", fail("stale failure"), succeed, func(t *testing.T, e *env, rec inbox.Record, _ error) {
			mustEqual(t, "status", rec.Status, inbox.StatusDone)
			mustEqual(t, "last error", rec.LastError, "")
		}},
		{"stale Process, second Process", process, process, func(t *testing.T, e *env, rec inbox.Record, staleErr error) {
			if !errors.Is(staleErr, inbox.ErrInProgress) {
				t.Errorf("the stale handling's Process = %v, want ErrInProgress (the second claim holds the message)", staleErr)
			}
			mustEqual(t, "status", rec.Status, inbox.StatusDone)
			mustEqual(t, "last error", rec.LastError, "")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, open, inbox.Config{})
			obs := newRunObserver()
			const lease = time.Minute
			d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Workers: 2, Lease: lease, PollInterval: time.Hour,
				ReapInterval: -1, CleanupInterval: -1, Observer: obs})
			entered := make(chan int, 2)
			steps := []chan step{make(chan step, 1), make(chan step, 1)}
			results := make([]error, 2) // what each handling returned
			mustHandle(t, d, "t", func(ctx context.Context, rec inbox.Record) error {
				i := ctx.Value(runKey{}).(int)
				entered <- i
				err := (<-steps[i])(ctx, e, rec) // ignores ctx's end: outlives its lease
				results[i] = err
				return err
			})
			e.start(d)
			t.Cleanup(func() { // runs before Close: no handling stays blocked when the test failed
				for _, s := range steps {
					select {
					case s <- succeed:
					default:
					}
				}
			})
			e.enqueue(inbox.Message{Source: "s", MessageID: "m", Topic: "t"})
			mustEqual(t, "first handling", receive(e, "first handling", entered), 0)
			first := e.get("s", "m")

			e.clock.Advance(lease + time.Second) // the first handling's lease expires
			d.Wake()
			mustEqual(t, "second handling", receive(e, "second handling (the same dispatcher claims again)", entered), 1)
			current := e.get("s", "m")
			mustEqual(t, "owner of the second claim", current.LockedBy, "w")
			if !current.LockedUntil.After(first.LockedUntil) {
				t.Fatalf("second lease until %v, not after the first's %v", current.LockedUntil, first.LockedUntil)
			}

			steps[0] <- c.stale
			mustEqual(t, "stale handling ended", receive(e, "end of the stale handling", obs.ended), 0)
			after := e.get("s", "m")
			if after.Status != current.Status || after.Attempt != current.Attempt || after.LockedBy != current.LockedBy ||
				!after.LockedUntil.Equal(current.LockedUntil) || after.LastError != current.LastError ||
				!after.NextAttemptAt.Equal(current.NextAttemptAt) {
				t.Fatalf("the stale handling's outcome changed the message:\nbefore %+v\nafter  %+v", current, after)
			}
			mustEqual(t, "lease lost warning", e.logs.Count("level=WARN", "lease lost", "message_id=m"), 1)

			steps[1] <- c.second
			mustEqual(t, "second handling ended", receive(e, "end of the second handling", obs.ended), 1)
			c.check(t, e, e.get("s", "m"), results[0])
		})
	}
}
