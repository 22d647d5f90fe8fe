package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
)

// Ordering.Apply orders the events of its types by their aggregate's key
// with its OnDead policy, unless the builder ordered the event (its key
// and policy stay) or set OnDead itself (its policy stays: it used to be
// replaced by the Ordering's).
func TestOrderingApply(t *testing.T) {
	ord := core.Ordering{Types: []string{"Changed"}, OnDead: core.BlockOnDead}
	skip := core.Ordering{Types: []string{"*"}, OnDead: core.SkipOnDead}
	build := func(b *core.Builder) core.Envelope {
		t.Helper()
		env, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	agg := func(typ string) *core.Builder {
		return core.NewEvent(typ).AggregateType("Order").AggregateID("42").PayloadJSONString(`{}`)
	}
	for _, tc := range []struct {
		name   string
		o      core.Ordering
		env    core.Envelope
		key    string
		onDead core.DeadPolicy
	}{
		{"type ordered", ord, build(agg("Changed")), core.AggregateOrderKey("Order", "42"), core.BlockOnDead},
		{"other type", ord, build(agg("Other")), "", core.BlockOnDead},
		{"the Ordering's policy", skip, build(agg("Other")), core.AggregateOrderKey("Order", "42"), core.SkipOnDead},
		{"the builder's OnDead wins", ord, build(agg("Changed").OnDead(core.SkipOnDead)), core.AggregateOrderKey("Order", "42"), core.SkipOnDead},
		{"the builder's explicit Block wins", skip, build(agg("Changed").OnDead(core.BlockOnDead)), core.AggregateOrderKey("Order", "42"), core.BlockOnDead},
		{"the builder's key and policy stay", skip, build(agg("Changed").OrderKey("k")), "k", core.BlockOnDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.o.Apply(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got.OrderKey() != tc.key || got.OnDead() != tc.onDead {
				t.Errorf("Apply = key %q, policy %v; want %q, %v", got.OrderKey(), got.OnDead(), tc.key, tc.onDead)
			}
		})
	}
	// An event of an ordered type with no key to take is refused.
	if _, err := ord.Apply(build(core.NewEvent("Changed").PayloadJSONString(`{}`))); !errors.Is(err, core.ErrNoOrderKey) {
		t.Errorf("Apply without an aggregate = %v, want ErrNoOrderKey", err)
	}
}

// An unknown dead policy is refused at Build, for an unordered event too
// (an Ordering may order it at Publish).
func TestBuildRefusesUnknownDeadPolicy(t *testing.T) {
	for _, b := range []*core.Builder{
		core.NewEvent("T").PayloadJSONString(`{}`).OnDead(core.DeadPolicy(9)),
		core.NewEvent("T").OrderKey("k").PayloadJSONString(`{}`).OnDead(core.DeadPolicy(9)),
	} {
		_, err := b.Build()
		var ve *core.ValidationError
		if !errors.Is(err, core.ErrInvalidDeadPolicy) || !errors.As(err, &ve) || ve.Field != "on_dead" {
			t.Errorf("Build with DeadPolicy(9) = %v, want a ValidationError of field on_dead wrapping ErrInvalidDeadPolicy", err)
		}
		if errors.Is(err, core.ErrInvalidText) {
			t.Errorf("Build with DeadPolicy(9) = %v: reported as invalid text", err)
		}
	}
}

// Every problem Ordering.Validate reports is a *ConfigError that wraps
// ErrInvalidConfig and the sentinel an envelope with that value fails
// with (it wrapped ErrInvalidConfig only).
func TestOrderingValidateWrapsSentinels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     core.Ordering
		field string
		want  error
	}{
		{"unknown OnDead", core.Ordering{OnDead: 5}, "OnDead", core.ErrInvalidDeadPolicy},
		{"empty type", core.Ordering{Types: []string{"A", ""}}, "Types[1]", core.ErrEmptyEventType},
		{"long type", core.Ordering{Types: []string{strings.Repeat("é", core.MaxEventTypeLen+1)}}, "Types[0]", core.ErrEventTypeTooLong},
		{"NUL in type", core.Ordering{Types: []string{"a\x00"}}, "Types[0]", core.ErrInvalidText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			var ce *core.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("Validate = %v, want a *ConfigError for %s", err, tc.field)
			}
			if !errors.Is(err, core.ErrInvalidConfig) || !errors.Is(err, tc.want) {
				t.Errorf("Validate = %v, want it to match ErrInvalidConfig and %v", err, tc.want)
			}
			if strings.HasSuffix(err.Error(), " ") {
				t.Errorf("Validate = %q: no message", err)
			}
		})
	}
	if err := (core.Ordering{Types: []string{"*", "A"}, OnDead: core.SkipOnDead}).Validate(); err != nil {
		t.Errorf("Validate of a valid Ordering = %v", err)
	}
}
