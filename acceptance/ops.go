package acceptance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Events that went DEAD while a downstream was broken are replayed after
// the fix: exactly the selected DEAD rows go back to NEW and reach DONE
// through the normal path (the poller), the others stay DEAD.
func testReplay(t *testing.T, h Harness) {
	f := newFixture(t, h, true, func(c *outbox.Config) {
		c.Dispatcher.MaxAttempts = 1
		c.Poller.SkipRecent = -1
	})
	var fixed atomic.Bool
	delivered := make(chan string, 8)
	listener := func(_ context.Context, e core.Envelope) error {
		if !fixed.Load() {
			return errors.New("downstream broken")
		}
		delivered <- e.ID()
		return nil
	}
	f.ob.RegisterFunc("PaymentRequested", listener)
	f.ob.RegisterFunc("MailRequested", listener)
	pay1 := mustEvent(t, core.NewEvent("PaymentRequested").PayloadJSONString(`{"n":1}`))
	pay2 := mustEvent(t, core.NewEvent("PaymentRequested").PayloadJSONString(`{"n":2}`))
	mail := mustEvent(t, core.NewEvent("MailRequested").PayloadJSONString(`{}`))
	if err := f.publish(t, nil, pay1, pay2, mail); err != nil {
		t.Fatal(err)
	}
	for _, e := range []core.Envelope{pay1, pay2, mail} {
		f.waitStatus(t, e.ID(), core.StatusDead)
	}
	fixed.Store(true)
	res, err := f.ob.ReplayDead(context.Background(), jdbcstore.DeadFilter{EventType: "PaymentRequested"}, jdbcstore.ReplayOptions{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 2 {
		t.Fatalf("replayed %d, want the 2 PaymentRequested events", res.Replayed)
	}
	waitFor(t, "replayed events DONE through the poller", func() bool {
		if _, err := parts.Outbox(f.ob).Poller.PollOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		return f.status(t, pay1.ID()).Status == core.StatusDone && f.status(t, pay2.ID()).Status == core.StatusDone
	})
	if st := f.status(t, mail.ID()).Status; st != core.StatusDead {
		t.Fatalf("unselected event is %v, want still DEAD", st)
	}
	if n := len(delivered); n != 2 {
		t.Fatalf("%d successful deliveries, want 2", n)
	}
}
