package core_test

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
)

// OrderEvent is an application's enum of event types.
type OrderEvent string

// Name implements core.EventType.
func (e OrderEvent) Name() string { return string(e) }

// OrderCreated is one OrderEvent.
const OrderCreated OrderEvent = "ORDER_CREATED"

// Aggregates is an application's enum of aggregate types.
type Aggregates string

// Name implements core.AggregateType.
func (a Aggregates) Name() string { return string(a) }

// OrderAggregate is one Aggregates value.
const OrderAggregate Aggregates = "ORDER"

func ExampleNewEventOf() {
	env, err := core.NewEventOf(OrderCreated).
		AggregateTypeOf(OrderAggregate).
		AggregateID("order-456").
		TenantID("tenant-123").
		Header("source", "checkout").
		OccurredAt(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)).
		PayloadJSONString(`{"total":10}`).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	src, _ := env.Header("source")
	fmt.Println(env.Type(), env.AggregateType(), env.AggregateID(), env.TenantID())
	fmt.Println(src, env.PayloadKind(), env.PayloadString())
	fmt.Println(env.OccurredAt().Format(time.RFC3339), len(env.ID()))
	// Output:
	// ORDER_CREATED ORDER order-456 tenant-123
	// checkout json {"total":10}
	// 2025-01-02T03:04:05Z 26
}

func ExampleNewEvent() {
	env, err := core.NewEvent("UserCreated").
		AggregateTypeOf(core.StringAggregateType("USER")).
		AggregateID("123").
		PayloadValue(map[string]string{"name": "John"}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env.Type(), env.AggregateType(), env.AggregateID(), env.PayloadString())
	// Output: UserCreated USER 123 {"name":"John"}
}

func ExampleJSONEvent() {
	env, err := core.JSONEvent("UserCreated", `{"name":"John"}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	var user struct{ Name string }
	if err := env.Decode(&user); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env.Type(), env.IsJSON(), user.Name)
	// Output: UserCreated true John
}

func ExampleEnvelope_Validate() {
	fmt.Println(errors.Is(core.Envelope{}.Validate(), core.ErrEmptyEventType))

	_, err := core.NewEvent(strings.Repeat("x", core.MaxEventTypeLen+1)).PayloadJSONString(`{}`).Build()
	var ve *core.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Field, errors.Is(err, core.ErrEventTypeTooLong))
	}

	_, err = core.JSONEvent("UserCreated", `{"name":`)
	fmt.Println(errors.Is(err, core.ErrInvalidJSON))
	fmt.Println(err)
	// Output:
	// true
	// event_type true
	// true
	// outbox: payload is not valid JSON (field payload)
}
