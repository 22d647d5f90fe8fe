package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// Two events with one id (two outboxes or tenants sharing the relay, each
// choosing its own ids), one routable and one not, published at once on
// one channel: the unroutable one fails with ErrUnroutable and the other
// is delivered. A return names its message only by id, exchange and
// routing key: the returned message was counted as delivered (the event
// DONE, its message dropped) and the routed one as unroutable.
func TestRelaySameIDRoutableAndUnroutable(t *testing.T) {
	ch := admin(t)
	x := newExchange(t, ch)
	newQueue(t, ch, x, "routable")
	r := newRelay(t, rabbitmq.Config{Exchange: x, RoutingKey: "{type}", Channels: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const rounds = 50
	for i := range rounds {
		id := fmt.Sprintf("same-id-%d", i)
		routable, err := core.NewEvent("routable").ID(id).PayloadBytes([]byte("a")).Build()
		if err != nil {
			t.Fatal(err)
		}
		unroutable, err := core.NewEvent("unroutable").ID(id).PayloadBytes([]byte("b")).Build()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var errRoutable, errUnroutable error
		wg.Add(2)
		go func() { defer wg.Done(); errRoutable = r.OnEvent(ctx, routable) }()
		go func() { defer wg.Done(); errUnroutable = r.OnEvent(ctx, unroutable) }()
		wg.Wait()
		if errRoutable != nil {
			t.Fatalf("round %d: the routable event: %v", i, errRoutable)
		}
		if !errors.Is(errUnroutable, rabbitmq.ErrUnroutable) {
			t.Fatalf("round %d: the unroutable event: %v, want ErrUnroutable", i, errUnroutable)
		}
	}
}
