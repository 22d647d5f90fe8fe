package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

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
			node := startOpsNode(t, open(t))
			node.publishDead(t, "1")
			res, err := node.ReplayDead(t.Context(), jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true})
			if err != nil || res.Replayed != 1 {
				t.Fatalf("ReplayDead = %+v, %v; want 1 replayed", res, err)
			}
			node.wantDelivered(t, "1")
			waitStatusCount(t, node.Outbox, core.StatusDone, 1)
		})
	}
}

// DiscardDead of the DEAD event that blocks an ordering key delivers the
// key's next event at once: it wakes the poller too.
func TestDiscardDeadWakesThePoller(t *testing.T) {
	for name, open := range orderedDatabases {
		t.Run(name, func(t *testing.T) {
			node := startOpsNode(t, open(t))
			node.publishDead(t, "1")
			publishOne(t, node.Outbox, "2") // behind the DEAD event of its key: it waits
			res, err := node.DiscardDead(t.Context(), jdbcstore.DeadFilter{}, jdbcstore.DiscardOptions{All: true})
			if err != nil || res.Discarded != 1 {
				t.Fatalf("DiscardDead = %+v, %v; want 1 discarded", res, err)
			}
			node.wantDelivered(t, "2")
		})
	}
}

// opsNode is a started outbox whose poller rests for an hour, so that
// only a wake-up delivers within opsWakeDeadline. Its events of type "E"
// are ordered by aggregate and go DEAD at their first failed attempt; its
// listener fails every attempt while failing is set, and reports the
// header n of each event it delivered.
type opsNode struct {
	*outbox.Outbox
	failing   atomic.Bool
	delivered chan string
}

// startOpsNode starts an opsNode on db, closed when the test ends.
func startOpsNode(t *testing.T, db *sqlx.DB) *opsNode {
	t.Helper()
	ob, err := outbox.New(t.Context(), db, outbox.Config{
		Logger:     quietLogger(),
		Ordering:   core.Ordering{Types: []string{"E"}},
		Dispatcher: dispatcher.Config{Workers: 1, MaxAttempts: 1},
		Poller:     poller.Config{Interval: time.Hour, BacklogInterval: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	node := &opsNode{Outbox: ob, delivered: make(chan string, 16)}
	ob.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		if node.failing.Load() {
			return errors.New("the listener fails")
		}
		node.delivered <- env.Headers()["n"]
		return nil
	})
	startUntilCleanup(t, ob)
	return node
}

// publishDead publishes event n with the listener failing, waits until it
// is DEAD and let go, and lets the listener succeed again.
func (node *opsNode) publishDead(t *testing.T, n string) {
	t.Helper()
	node.failing.Store(true)
	publishOne(t, node.Outbox, n)
	waitStatusCount(t, node.Outbox, core.StatusDead, 1)
	waitLetGo(t, node.Outbox)
	node.failing.Store(false)
}

// wantDelivered waits for the listener's next delivery, which must be of
// event n.
func (node *opsNode) wantDelivered(t *testing.T, n string) {
	t.Helper()
	if got := testsupport.Recv(t, opsWakeDeadline, node.delivered, "event "+n+" delivered (no wake-up)"); got != n {
		t.Fatalf("delivered event %s, want %s", got, n)
	}
}

// publishOne publishes an event of type "E" on aggregate Account/42 with
// header n, in a transaction of its own.
func publishOne(t *testing.T, ob *outbox.Outbox, n string) {
	t.Helper()
	env, err := outbox.NewEvent("E").AggregateType("Account").AggregateID("42").Header("n", n).PayloadJSONString(`{}`).Build()
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
