package core_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

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

// Two aggregates never share an ordering key: "a:b" + "c" and "a" + "b:c"
// did, so a DEAD event of one blocked the other. Keys of aggregate types
// without ':' (and not beginning with a backslash) are unchanged, so
// rows stored by earlier versions keep theirs.
func TestAggregateOrderKeyIsInjective(t *testing.T) {
	if a, b := core.AggregateOrderKey("a:b", "c"), core.AggregateOrderKey("a", "b:c"); a == b {
		t.Fatalf(`AggregateOrderKey("a:b", "c") = AggregateOrderKey("a", "b:c") = %q`, a)
	}
	for _, tc := range []struct{ typ, id, want string }{
		{"Order", "42", "Order:42"},
		{"a", "b:c", "a:b:c"},
		{"Order", `x\y`, `Order:x\y`},
		{`a\b`, "1", `a\b:1`},
		{"", "1", ":1"},
		{"Konto", "é", "Konto:é"},
		{"a:b", "c", `\3:a:b:c`},
		{"é:", "1", `\2:é::1`},
		{`\x`, "1", `\2:\x:1`},
	} {
		if got := core.AggregateOrderKey(tc.typ, tc.id); got != tc.want {
			t.Errorf("AggregateOrderKey(%q, %q) = %q, want %q", tc.typ, tc.id, got, tc.want)
		}
	}
	parts := []string{"", ":", "::", "a", "a:", ":a", "a:b", "b:c", `\`, `\1`, `\1:`, `\1:a`, "1", "1:", `\\`, `a\`, "é", "é:"}
	seen := make(map[string][2]string)
	for _, typ := range parts {
		for _, id := range parts {
			key := core.AggregateOrderKey(typ, id)
			if prev, dup := seen[key]; dup {
				t.Errorf("AggregateOrderKey(%q, %q) = AggregateOrderKey(%q, %q) = %q", typ, id, prev[0], prev[1], key)
			}
			seen[key] = [2]string{typ, id}
		}
	}
	// The longest valid aggregate, its type all colons, still fits.
	env, err := core.NewEvent("T").AggregateType(strings.Repeat(":", core.MaxAggregateTypeLen)).
		AggregateID(strings.Repeat("é", core.MaxAggregateIDLen)).Ordered().PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatalf("Build of the longest aggregate, ordered: %v", err)
	}
	if n := utf8.RuneCountInString(env.OrderKey()); n > core.MaxOrderKeyLen {
		t.Errorf("key of %d characters", n)
	}
}

// FuzzAggregateOrderKey decodes the key of any aggregate back to its type
// and id: the key is injective.
func FuzzAggregateOrderKey(f *testing.F) {
	f.Add("Order", "42")
	f.Add("a:b", "c")
	f.Add("a", "b:c")
	f.Add(`\3`, "a:b")
	f.Add("", `\1:`)
	f.Add("é:", "\xff")
	f.Fuzz(func(t *testing.T, typ, id string) {
		key := core.AggregateOrderKey(typ, id)
		gotTyp, gotID, ok := decodeAggregateOrderKey(key)
		if !ok || gotTyp != typ || gotID != id {
			t.Fatalf("AggregateOrderKey(%q, %q) = %q decodes to %q, %q, %v", typ, id, key, gotTyp, gotID, ok)
		}
	})
}

// decodeAggregateOrderKey is the inverse of core.AggregateOrderKey.
func decodeAggregateOrderKey(key string) (typ, id string, ok bool) {
	rest, long := strings.CutPrefix(key, `\`)
	if !long {
		return strings.Cut(key, ":")
	}
	digits, rest, ok := strings.Cut(rest, ":")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || n < 0 {
		return "", "", false
	}
	i := 0
	for ; n > 0 && i < len(rest); n-- {
		_, size := utf8.DecodeRuneInString(rest[i:])
		i += size
	}
	if n > 0 {
		return "", "", false
	}
	id, ok = strings.CutPrefix(rest[i:], ":")
	return rest[:i], id, ok
}
