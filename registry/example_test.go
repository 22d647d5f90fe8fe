package registry_test

import (
	"context"
	"fmt"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/registry"
)

// A registry maps event types to listeners: the listeners of the exact
// type run first, then the wildcard ones, each group in registration order.
func Example() {
	reg := registry.New().
		RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
			fmt.Println("billing:", env.Type())
			return nil
		}).
		RegisterFunc("OrderPlaced", func(ctx context.Context, env core.Envelope) error {
			fmt.Println("shipping:", env.Type())
			return nil
		}).
		RegisterAllFunc(func(ctx context.Context, env core.Envelope) error {
			fmt.Println("audit:", env.Type())
			return nil
		})

	env, err := core.NewEvent("OrderPlaced").PayloadJSONString(`{"order":7}`).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	// The dispatcher does this for every event it delivers.
	for _, l := range reg.ListenersFor(env.Type()) {
		if err := l.OnEvent(context.Background(), env); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(reg.Types())
	// Output:
	// billing: OrderPlaced
	// shipping: OrderPlaced
	// audit: OrderPlaced
	// [* OrderPlaced]
}

// TryRegister reports a bad registration as an error instead of a panic,
// for listeners configured from data.
func ExampleRegistry_TryRegister() {
	reg := registry.New()
	err := reg.TryRegister("", core.ListenerFunc(func(context.Context, core.Envelope) error { return nil }))
	fmt.Println(err != nil)
	// Output: true
}
