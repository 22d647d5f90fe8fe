package publish_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/publish"
)

func BenchmarkPublish(b *testing.B) { benchPublish(b, core.Ordering{}) }

// BenchmarkPublishManyOrderedTypes publishes an unordered event with
// 10,000 ordered types configured: finding its type costs one lookup.
func BenchmarkPublishManyOrderedTypes(b *testing.B) {
	types := make([]string, 10000)
	for i := range types {
		types[i] = fmt.Sprintf("Ordered%d", i)
	}
	benchPublish(b, core.Ordering{Types: types})
}

// benchPublish publishes one unordered event per iteration through a
// Client ordering o's types.
func benchPublish(b *testing.B, o core.Ordering) {
	c, err := publish.New(nopInserter{}, nopHotQueue{})
	if err != nil {
		b.Fatal(err)
	}
	c.SetOrdering(o)
	env, err := core.JSONEvent("USER_CREATED", `{"id":123}`)
	if err != nil {
		b.Fatal(err)
	}
	tx := &benchTx{}
	ctx := core.ContextWithTx(context.Background(), tx)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Publish(ctx, env); err != nil {
			b.Fatal(err)
		}
		tx.hooks = tx.hooks[:0]
	}
}

// Allocation-free fakes so that BenchmarkPublish measures Publish itself.

type nopInserter struct{}

func (nopInserter) Insert(context.Context, core.Execer, core.Envelope, core.Lease) error { return nil }

type nopHotQueue struct{}

func (nopHotQueue) EnqueueHot(core.Envelope, core.Lease) bool { return true }
func (nopHotQueue) HotLease(core.Envelope) core.Lease         { return core.Lease{} }

type benchTx struct {
	fakeTx
	hooks []func()
}

func (*benchTx) Active() bool             { return true }
func (tx *benchTx) AfterCommit(fn func()) { tx.hooks = append(tx.hooks, fn) }
