package core_test

import (
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
)

// UserEvent is a user-defined string enum implementing core.EventType.
type UserEvent string

func (e UserEvent) Name() string { return string(e) }

const (
	UserCreated UserEvent = "USER_CREATED"
	UserUpdated UserEvent = "USER_UPDATED"
)

// Aggregate is a user-defined string enum implementing core.AggregateType.
type Aggregate string

func (a Aggregate) Name() string { return string(a) }

const (
	AggregateUser  Aggregate = "USER"
	AggregateOrder Aggregate = "ORDER"
)

// orderEvent is an int enum, the closest Go shape to a Java enum.
type orderEvent int

const (
	orderPlaced orderEvent = iota
	orderPaid
)

func (e orderEvent) Name() string {
	return [...]string{"ORDER_PLACED", "ORDER_PAID"}[e]
}

var (
	_ core.EventType     = UserCreated
	_ core.EventType     = orderPaid
	_ core.AggregateType = AggregateUser
	_ core.EventType     = core.StringEventType("")
	_ core.AggregateType = core.StringAggregateType("")
)

// An enum event type and aggregate type yield their names.
func TestTypeSafeEventAndAggregateTypes(t *testing.T) {
	env := mustBuild(t, core.NewEventOf(UserCreated).
		AggregateTypeOf(AggregateUser).
		AggregateID("123").
		PayloadJSONString(`{"name":"John"}`))
	if env.Type() != "USER_CREATED" || env.Type() != UserCreated.Name() {
		t.Errorf("Type() = %q", env.Type())
	}
	if env.AggregateType() != "USER" || env.AggregateType() != AggregateUser.Name() {
		t.Errorf("AggregateType() = %q, want the enum name USER", env.AggregateType())
	}

	env = mustBuild(t, core.NewEventOf(orderPaid).AggregateTypeOf(AggregateOrder).PayloadJSONString(`{}`))
	if env.Type() != "ORDER_PAID" || env.AggregateType() != "ORDER" {
		t.Errorf("int enum: Type()=%q AggregateType()=%q", env.Type(), env.AggregateType())
	}
	if orderPlaced.Name() != "ORDER_PLACED" || UserUpdated.Name() != "USER_UPDATED" {
		t.Error("enum names")
	}
}

func TestAggregateTypeOfNilClears(t *testing.T) {
	env := mustBuild(t, ev().AggregateTypeOf(AggregateUser).AggregateTypeOf(nil))
	if env.AggregateType() != "" {
		t.Errorf("AggregateType() = %q after AggregateTypeOf(nil)", env.AggregateType())
	}
}

// ptrName is a type-safe name whose Name, on a pointer receiver, reads
// the value: on a nil pointer it would panic.
type ptrName struct{ name string }

func (p *ptrName) Name() string { return p.name }

// funcName is a type-safe name given by a function: a nil one would
// panic.
type funcName func() string

func (f funcName) Name() string { return f() }

// A nil value of a type-safe name (a nil pointer, a nil func) counts as
// nil, as the godoc says, instead of panicking in a setter that never
// fails: NewEventOf fails Build with ErrEmptyEventType, AggregateTypeOf
// clears the aggregate type.
func TestTypedNilNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  interface {
			core.EventType
			core.AggregateType
		}
	}{
		{"nil pointer", (*ptrName)(nil)},
		{"nil func", funcName(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := core.NewEventOf(tc.typ).PayloadJSONString(`{}`).Build()
			if !errors.Is(err, core.ErrEmptyEventType) {
				t.Errorf("NewEventOf(%T(nil)).Build() = %v, want ErrEmptyEventType", tc.typ, err)
			}
			env := mustBuild(t, ev().AggregateTypeOf(AggregateUser).AggregateTypeOf(tc.typ))
			if env.AggregateType() != "" {
				t.Errorf("AggregateType() = %q after AggregateTypeOf(%T(nil))", env.AggregateType(), tc.typ)
			}
		})
	}
	// Non-nil values still name the type.
	env := mustBuild(t, core.NewEventOf(&ptrName{"P"}).AggregateTypeOf(funcName(func() string { return "F" })).PayloadJSONString(`{}`))
	if env.Type() != "P" || env.AggregateType() != "F" {
		t.Errorf("Type() = %q, AggregateType() = %q, want P, F", env.Type(), env.AggregateType())
	}
}

func TestStringEventAndAggregateType(t *testing.T) {
	et := core.StringEventType("DynamicEvent")
	at := core.StringAggregateType("CustomAggregate")
	if et.Name() != "DynamicEvent" || at.Name() != "CustomAggregate" {
		t.Fatalf("Name() = %q, %q", et.Name(), at.Name())
	}
	env := mustBuild(t, core.NewEventOf(et).AggregateTypeOf(at).AggregateID("id-456").PayloadJSONString(`{}`))
	if env.Type() != "DynamicEvent" || env.AggregateType() != "CustomAggregate" || env.AggregateID() != "id-456" {
		t.Errorf("got %q %q %q", env.Type(), env.AggregateType(), env.AggregateID())
	}
	// The same name through the string and the typed API gives the same envelope type.
	plain := mustBuild(t, core.NewEvent("DynamicEvent").PayloadJSONString(`{}`))
	if plain.Type() != env.Type() {
		t.Error("NewEvent and NewEventOf disagree")
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		s     core.Status
		num   int8
		str   string
		valid bool
	}{
		{core.StatusNew, 0, "NEW", true},
		{core.StatusDone, 1, "DONE", true},
		{core.StatusRetry, 2, "RETRY", true},
		{core.StatusDead, 3, "DEAD", true},
		{core.Status(4), 4, "Status(4)", false},
		{core.Status(-1), -1, "Status(-1)", false},
		{core.Status(127), 127, "Status(127)", false},
	}
	for _, tc := range tests {
		if int8(tc.s) != tc.num {
			t.Errorf("%v has value %d, want %d (stored values are a contract)", tc.s, int8(tc.s), tc.num)
		}
		if got := tc.s.String(); got != tc.str {
			t.Errorf("Status(%d).String() = %q, want %q", tc.num, got, tc.str)
		}
		if got := tc.s.Valid(); got != tc.valid {
			t.Errorf("Status(%d).Valid() = %v, want %v", tc.num, got, tc.valid)
		}
	}
}

func TestPayloadKind(t *testing.T) {
	tests := []struct {
		k   core.PayloadKind
		num uint8
		str string
	}{
		{core.PayloadJSON, 0, "json"},
		{core.PayloadBytes, 1, "bytes"},
		{core.PayloadKind(2), 2, "PayloadKind(2)"},
		{core.PayloadKind(255), 255, "PayloadKind(255)"},
	}
	for _, tc := range tests {
		if uint8(tc.k) != tc.num {
			t.Errorf("%v has value %d, want %d", tc.k, uint8(tc.k), tc.num)
		}
		if got := tc.k.String(); got != tc.str {
			t.Errorf("PayloadKind(%d).String() = %q, want %q", tc.num, got, tc.str)
		}
	}
	if env := mustBuild(t, core.NewEvent("E").PayloadBytes([]byte("x"))); env.PayloadKind() != core.PayloadBytes || env.IsJSON() {
		t.Errorf("bytes envelope kind = %v", env.PayloadKind())
	}
}
