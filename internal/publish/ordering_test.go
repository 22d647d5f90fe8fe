package publish_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/publish"
)

// A Client's ordering inserts each event as core.Ordering.Apply orders it,
// for every kind of Ordering and event.
func TestSetOrderingOrdersAsApply(t *testing.T) {
	orderings := []core.Ordering{
		{},
		{Types: []string{"A"}},
		{Types: []string{"B", "A"}, OnDead: core.SkipOnDead},
		{Types: []string{"*"}},
		{Types: []string{"X", "*"}, OnDead: core.SkipOnDead},
		{Types: []string{"X"}},
	}
	events := map[string]*core.Builder{
		"aggregate":       core.NewEvent("A").AggregateType("Acc").AggregateID("1"),
		"other type":      core.NewEvent("C").AggregateType("Acc").AggregateID("2"),
		"no aggregate":    core.NewEvent("A"),
		"own key":         core.NewEvent("C").OrderKey("k"),
		"own key, skip":   core.NewEvent("A").OrderKey("k").OnDead(core.SkipOnDead),
		"own policy":      core.NewEvent("A").AggregateType("Acc").AggregateID("3").OnDead(core.SkipOnDead),
		"own block, type": core.NewEvent("B").AggregateType("Acc").AggregateID("4").OnDead(core.BlockOnDead),
	}
	for i, o := range orderings {
		for name, b := range events {
			t.Run(fmt.Sprintf("%d/%s", i, name), func(t *testing.T) {
				env := mustBuild(t, b.PayloadJSONString(`{}`))
				want, wantErr := o.Apply(env)
				st := &batchInserter{}
				c, err := publish.New(st, &fakeHotQueue{})
				if err != nil {
					t.Fatal(err)
				}
				c.SetOrdering(o)
				_, err = c.PublishAll(core.ContextWithTx(context.Background(), newFakeTx()), env)
				if wantErr != nil {
					if !errors.Is(err, core.ErrNoOrderKey) || !errors.Is(wantErr, core.ErrNoOrderKey) {
						t.Fatalf("Publish: %v; Apply: %v", err, wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(st.batches) != 1 || len(st.batches[0]) != 1 {
					t.Fatalf("inserted %v, want one batch of the event", st.batches)
				}
				if got := st.batches[0][0]; got.OrderKey() != want.OrderKey() || got.OnDead() != want.OnDead() {
					t.Fatalf("inserted with key %q policy %v, want key %q policy %v", got.OrderKey(), got.OnDead(), want.OrderKey(), want.OnDead())
				}
			})
		}
	}
}
