package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/retry"
)

// A handler that must have its effect once writes through Process (or
// ProcessTx) with its own message and its ctx: the dispatcher's lease on
// the message is the handler's own, so the effect and the Done mark commit
// together, and the acknowledgement finds the message Done. ProcessTx used
// to see that live lease as another worker's and return ErrInProgress on
// every attempt, until the message was Dead. Any other message, or the
// same key in another table, leased by the same owner, is still in
// progress.
func testHandlerProcessesItsOwnMessage(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE effects (id VARCHAR(64) NOT NULL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	other, err := inbox.New(e.ctx, e.db, inbox.Config{Table: "other_inbox", Now: e.clock.Now, Logger: e.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "node", BatchSize: 2, MaxAttempts: 3,
		Retry: retry.PolicyFunc(func(int) time.Duration { return time.Second })})
	failOnce := true
	results := map[string]error{} // what Process returned to each handling, by message id
	mustHandle(t, d, "topic", func(ctx context.Context, m inbox.Record) error {
		in := inbox.FromContext(ctx)
		if m.MessageID == "a" {
			// b is in the same batch, leased by the same owner, and the
			// other table's a too: neither is this handler's.
			_, results["b from a"] = in.Process(ctx, inbox.Message{Source: "s", MessageID: "b"}, func(context.Context, *sqlx.Tx) error { return nil })
			_, results["other a"] = other.Process(ctx, inbox.Message{Source: "s", MessageID: "a"}, func(context.Context, *sqlx.Tx) error { return nil })
		}
		p, err := in.Process(ctx, inbox.Message{Source: m.Source, MessageID: m.MessageID, Topic: m.Topic},
			func(ctx context.Context, tx *sqlx.Tx) error {
				if _, err := tx.ExecContext(ctx, e.db.Rebind(`INSERT INTO effects (id) VALUES (?)`), m.MessageID); err != nil {
					return err // a second effect would violate the key
				}
				if m.MessageID == "b" && failOnce {
					failOnce = false
					return errors.New("not yet")
				}
				return nil
			})
		if err == nil && !p {
			err = errors.New("skipped as a redelivery")
		}
		results[m.MessageID] = err
		return err
	})
	e.enqueue(inbox.Message{Source: "s", MessageID: "a"})
	e.enqueue(inbox.Message{Source: "s", MessageID: "b"})
	if err := other.Enqueue(e.ctx, inbox.Message{Source: "s", MessageID: "a", Topic: "topic", Payload: []byte{}}); err != nil {
		t.Fatal(err)
	}
	if recs, err := other.Claim(e.ctx, "node", time.Hour, 1); err != nil || len(recs) != 1 {
		t.Fatalf("claim in the other table = %d, %v", len(recs), err)
	}

	if n, err := d.RunOnce(e.ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce = %d, %v; want 2", n, err)
	}
	for what, want := range map[string]error{"a": nil, "b from a": inbox.ErrInProgress, "other a": inbox.ErrInProgress} {
		if err := results[what]; !errors.Is(err, want) || want == nil && err != nil {
			t.Errorf("Process of %s = %v; want %v", what, err, want)
		}
	}
	a := e.get("s", "a")
	mustEqual(t, "a status", a.Status, inbox.StatusDone)
	mustEqual(t, "a attempt", a.Attempt, 1)
	mustEqual(t, "a lease", a.LockedBy, "")
	b := e.get("s", "b")
	mustEqual(t, "b status after its failed attempt", b.Status, inbox.StatusProcessing)
	mustEqual(t, "b attempt", b.Attempt, 1)

	e.clock.Advance(time.Second)
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("second RunOnce = %d, %v; want 1", n, err)
	}
	mustEqual(t, "b error", results["b"], error(nil))
	mustEqual(t, "b status", e.get("s", "b").Status, inbox.StatusDone)
	var n int
	if err := e.db.QueryRowContext(e.ctx, `SELECT COUNT(*) FROM effects`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "effects", n, 2)
	mustEqual(t, "lease lost warnings", e.logs.Count("lease lost"), 0)

	// A redelivery of a Done message is not queued again.
	e.enqueue(inbox.Message{Source: "s", MessageID: "a"})
	if n, err := d.RunOnce(e.ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce after the redelivery = %d, %v; want 0", n, err)
	}
}

// A handler whose own Process commits the message Done and which then
// fails leaves it Done, not retried, and says so; it logged that the
// lease was lost and to increase Lease. Its outcome is processed: the
// observer was told retry (dead on the last attempt) and an ERROR said
// the handler failed and would be retried, so metrics counted a message
// processed once as a failure.
func TestHandlerFailingAfterItsProcessCommitted(t *testing.T) {
	for _, maxAttempts := range []int{1, 3} {
		t.Run(fmt.Sprintf("MaxAttempts=%d", maxAttempts), func(t *testing.T) {
			testHandlerFailingAfterItsProcessCommitted(t, maxAttempts)
		})
	}
}

func testHandlerFailingAfterItsProcessCommitted(t *testing.T, maxAttempts int) {
	rec := &recorder{}
	e := newEnv(t, openSQLite, inbox.Config{Observer: rec})
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "node", MaxAttempts: maxAttempts,
		Retry: retry.PolicyFunc(func(int) time.Duration { return time.Second })})
	mustHandle(t, d, "topic", func(ctx context.Context, m inbox.Record) error {
		if _, err := inbox.FromContext(ctx).Process(ctx, inbox.Message{Source: m.Source, MessageID: m.MessageID},
			func(context.Context, *sqlx.Tx) error { return nil }); err != nil {
			return err
		}
		return errors.New("failed after its effect committed")
	})
	e.enqueue(inbox.Message{Source: "s", MessageID: "c"})
	if n, err := d.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1", n, err)
	}
	mustEqual(t, "status", e.get("s", "c").Status, inbox.StatusDone)
	mustEqual(t, "lease lost warnings", e.logs.Count("lease lost"), 0)
	mustEqual(t, "lines saying it stays Done", e.logs.Count("committed the message Done"), 1)
	mustEqual(t, "ERROR lines", e.logs.Count("level=ERROR"), 0)
	if all := rec.all(); len(all) == 0 || all[len(all)-1].result.Outcome != core.InboxProcessed {
		t.Errorf("observed %+v; want the last processing to end processed", all)
	}
	e.clock.Advance(time.Minute)
	if n, err := d.RunOnce(e.ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce later = %d, %v; want 0 (not retried)", n, err)
	}
}
