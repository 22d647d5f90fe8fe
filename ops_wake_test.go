package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
)

// opsWakeDeadline bounds the waits of the tests below: far less than
// their poller's interval (an hour), so only a poll woken by the
// operation can deliver in time.
const opsWakeDeadline = 20 * time.Second

// ReplayDead on an Outbox delivers the replayed events at once: it wakes
// the poller, which waited for its Interval (5 s by default; an hour
// here) before. Replayed right after the event went DEAD, on the node that
// ran it.
func TestReplayDeadWakesThePoller(t *testing.T) {
	for name, open := range orderedDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			var calls atomic.Int32
			delivered := make(chan struct{}, 4)
			ob, err := outbox.New(t.Context(), db, outbox.Config{
				Logger:     quietLogger(),
				Dispatcher: dispatcher.Config{Workers: 1, MaxAttempts: 1},
				Poller:     poller.Config{Interval: time.Hour, BacklogInterval: time.Hour},
			})
			if err != nil {
				t.Fatal(err)
			}
			ob.RegisterFunc("E", func(context.Context, core.Envelope) error {
				defer func() { delivered <- struct{}{} }()
				if calls.Add(1) == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			})
			if err := ob.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ob.Close(context.Background()) })
			publishOne(t, ob, "E", "")
			waitStatusCount(t, ob, core.StatusDead, 1)
			waitLetGo(t, ob)
			res, err := ob.ReplayDead(t.Context(), jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true})
			if err != nil || res.Replayed != 1 {
				t.Fatalf("ReplayDead = %+v, %v; want 1 replayed", res, err)
			}
			testsupport.WaitFor(t, opsWakeDeadline, "the replayed event delivered", func() bool { return calls.Load() >= 2 }, delivered)
			waitStatusCount(t, ob, core.StatusDone, 1)
		})
	}
}

// DiscardDead of the DEAD event that blocks an ordering key delivers the
// key's next event at once: it wakes the poller too.
func TestDiscardDeadWakesThePoller(t *testing.T) {
	for name, open := range orderedDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			next := make(chan struct{}, 1)
			ob, err := outbox.New(t.Context(), db, outbox.Config{
				Logger:     quietLogger(),
				Ordering:   core.Ordering{Types: []string{"E"}},
				Dispatcher: dispatcher.Config{Workers: 1, MaxAttempts: 1},
				Poller:     poller.Config{Interval: time.Hour, BacklogInterval: time.Hour},
			})
			if err != nil {
				t.Fatal(err)
			}
			ob.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
				if env.Headers()["n"] == "1" {
					return errors.New("the first event fails for good")
				}
				next <- struct{}{}
				return nil
			})
			if err := ob.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ob.Close(context.Background()) })
			publishOne(t, ob, "E", "1")
			waitStatusCount(t, ob, core.StatusDead, 1)
			waitLetGo(t, ob)
			publishOne(t, ob, "E", "2") // behind the DEAD event of its key: it waits
			res, err := ob.DiscardDead(t.Context(), jdbcstore.DeadFilter{}, jdbcstore.DiscardOptions{All: true})
			if err != nil || res.Discarded != 1 {
				t.Fatalf("DiscardDead = %+v, %v; want 1 discarded", res, err)
			}
			testsupport.WaitFor(t, opsWakeDeadline, "the key's next event delivered", func() bool { return len(next) > 0 }, nil)
		})
	}
}

// publishOne publishes an event of type typ on aggregate Account/42 (with
// header n unless n is ""), in a transaction of its own.
func publishOne(t *testing.T, ob *outbox.Outbox, typ, n string) {
	t.Helper()
	b := outbox.NewEvent(typ).AggregateType("Account").AggregateID("42").PayloadJSONString(`{}`)
	if n != "" {
		b = b.Header("n", n)
	}
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.InTx(t.Context(), func(ctx context.Context) error {
		_, err := ob.Publish(ctx, env)
		return err
	}); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// waitLetGo waits until the dispatcher holds no event: a worker lets an
// event go after its final status write returned, so a claim racing that
// moment (a replay right after the DEAD row shows) would find it still
// held here and leave it for the next poll, an hour away in these tests.
func waitLetGo(t *testing.T, ob *outbox.Outbox) {
	t.Helper()
	testsupport.WaitFor(t, opsWakeDeadline, "the dispatcher to let its events go", func() bool {
		return ob.DispatcherStats().HeldBytes == 0
	}, nil)
}

// waitStatusCount waits until n rows have status st.
func waitStatusCount(t *testing.T, ob *outbox.Outbox, st core.Status, n int) {
	t.Helper()
	testsupport.WaitFor(t, opsWakeDeadline, "rows "+st.String(), func() bool {
		counts, err := ob.CountByStatus(t.Context())
		return err == nil && counts[st] >= n
	}, nil)
}
