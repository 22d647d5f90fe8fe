package registry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/registry"
)

// userEvent is a user-defined string enum implementing core.EventType.
type userEvent string

func (e userEvent) Name() string { return string(e) }

const (
	userCreated userEvent = "UserCreated"
	userDeleted userEvent = "UserDeleted"
)

// recorder hands out listeners that append their name to a shared slice,
// so a test can see in which order a listener list runs.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) listener(name string) core.Listener {
	return core.ListenerFunc(func(context.Context, core.Envelope) error {
		r.mu.Lock()
		r.got = append(r.got, name)
		r.mu.Unlock()
		return nil
	})
}

// run calls every listener of ls in order and returns the names recorded.
func (r *recorder) run(t *testing.T, ls []core.Listener) []string {
	t.Helper()
	r.mu.Lock()
	r.got = nil
	r.mu.Unlock()
	for _, l := range ls {
		if err := l.OnEvent(context.Background(), core.Envelope{}); err != nil {
			t.Fatalf("listener returned %v", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func nop() core.Listener {
	return core.ListenerFunc(func(context.Context, core.Envelope) error { return nil })
}

func TestExactListenersFirstThenWildcardInRegistrationOrder(t *testing.T) {
	rec := &recorder{}
	r := registry.New()
	// Interleave wildcard and exact registrations: the result must still be
	// every exact listener (in order) followed by every wildcard (in order).
	r.RegisterAll(rec.listener("W1"))
	r.Register("A", rec.listener("A1"))
	r.Register("B", rec.listener("B1"))
	r.RegisterAll(rec.listener("W2"))
	r.Register("A", rec.listener("A2"))
	r.RegisterFunc("A", func(context.Context, core.Envelope) error {
		rec.mu.Lock()
		rec.got = append(rec.got, "A3")
		rec.mu.Unlock()
		return nil
	})
	r.RegisterAll(rec.listener("W3"))
	r.RegisterAllFunc(func(context.Context, core.Envelope) error {
		rec.mu.Lock()
		rec.got = append(rec.got, "W4")
		rec.mu.Unlock()
		return nil
	})

	cases := map[string][]string{
		"A":       {"A1", "A2", "A3", "W1", "W2", "W3", "W4"},
		"B":       {"B1", "W1", "W2", "W3", "W4"},
		"Unknown": {"W1", "W2", "W3", "W4"},
	}
	for typ, want := range cases {
		if got := rec.run(t, r.ListenersFor(typ)); !slices.Equal(got, want) {
			t.Errorf("ListenersFor(%q) ran %v, want %v", typ, got, want)
		}
	}
}

func TestUnknownTypeGetsOnlyWildcard(t *testing.T) {
	rec := &recorder{}
	r := registry.New()
	r.Register("A", rec.listener("A1"))
	if got := r.ListenersFor("Unknown"); len(got) != 0 {
		t.Fatalf("ListenersFor(unknown) without wildcard = %d listeners, want 0", len(got))
	}
	r.RegisterAll(rec.listener("W1"))
	r.RegisterAll(rec.listener("W2"))
	if got, want := rec.run(t, r.ListenersFor("Unknown")), []string{"W1", "W2"}; !slices.Equal(got, want) {
		t.Fatalf("ListenersFor(unknown) ran %v, want %v", got, want)
	}
	// The type name is matched exactly: no case folding, no prefix match.
	for _, typ := range []string{"a", "A ", "AA", ""} {
		if got, want := rec.run(t, r.ListenersFor(typ)), []string{"W1", "W2"}; !slices.Equal(got, want) {
			t.Errorf("ListenersFor(%q) ran %v, want %v", typ, got, want)
		}
	}
}

func TestNewRegistryIsEmpty(t *testing.T) {
	r := registry.New()
	if got := r.ListenersFor("A"); len(got) != 0 {
		t.Fatalf("empty registry: ListenersFor = %d listeners", len(got))
	}
	if got := r.Types(); len(got) != 0 {
		t.Fatalf("empty registry: Types() = %v", got)
	}
}

func TestRegisterTypeWithUserEnum(t *testing.T) {
	rec := &recorder{}
	r := registry.New()
	r.RegisterType(userCreated, rec.listener("created"))
	r.RegisterType(core.StringEventType("UserCreated"), rec.listener("created-dynamic"))
	r.RegisterType(userDeleted, rec.listener("deleted"))

	if got, want := rec.run(t, r.ListenersFor("UserCreated")), []string{"created", "created-dynamic"}; !slices.Equal(got, want) {
		t.Fatalf("ListenersFor(UserCreated) ran %v, want %v", got, want)
	}
	if got, want := rec.run(t, r.ListenersFor(userDeleted.Name())), []string{"deleted"}; !slices.Equal(got, want) {
		t.Fatalf("ListenersFor(UserDeleted) ran %v, want %v", got, want)
	}
}

func TestTryRegisterRejectsInvalidInput(t *testing.T) {
	cases := []struct {
		name      string
		eventType string
		l         core.Listener
	}{
		{"empty type", "", nop()},
		{"wildcard type", registry.Wildcard, nop()},
		{"nil listener", "A", nil},
		{"nil ListenerFunc", "A", core.ListenerFunc(nil)},
		{"nil pointer", "A", (*nilPointerListener)(nil)},
		// Types no event can have: the listener would never run.
		{"type too long", strings.Repeat("é", core.MaxEventTypeLen+1), nop()},
		{"invalid UTF-8", "bad\xff", nop()},
		{"NUL", "a\x00b", nop()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := registry.New()
			err := r.TryRegister(tc.eventType, tc.l)
			if !errors.Is(err, core.ErrInvalidConfig) {
				t.Fatalf("TryRegister(%q, %v) = %v, want an error wrapping core.ErrInvalidConfig", tc.eventType, tc.l, err)
			}
			if got := r.Types(); len(got) != 0 {
				t.Fatalf("a rejected registration changed the registry: Types() = %v", got)
			}
		})
	}
}

// nilPointerListener is a listener type whose nil pointer a
// registration must refuse.
type nilPointerListener struct{ calls int }

func (l *nilPointerListener) OnEvent(context.Context, core.Envelope) error { l.calls++; return nil }

// RegisterAll refuses a nil function or pointer behind a non-nil
// interface, as TryRegister does.
func TestRegisterAllRejectsNilValues(t *testing.T) {
	for name, l := range map[string]core.Listener{"nil": nil, "nil ListenerFunc": core.ListenerFunc(nil), "nil pointer": (*nilPointerListener)(nil)} {
		mustPanicInvalid(t, "RegisterAll("+name+")", func() { registry.New().RegisterAll(l) })
	}
}

func TestTryRegisterAccepts(t *testing.T) {
	r := registry.New()
	if err := r.TryRegister("A", nop()); err != nil {
		t.Fatalf("TryRegister(A) = %v", err)
	}
	if got := len(r.ListenersFor("A")); got != 1 {
		t.Fatalf("ListenersFor(A) = %d listeners, want 1", got)
	}
}

// mustPanicInvalid runs fn and fails unless it panics with an error wrapping
// core.ErrInvalidConfig.
func mustPanicInvalid(t *testing.T, what string, fn func()) {
	t.Helper()
	var rec any
	func() {
		defer func() { rec = recover() }()
		fn()
	}()
	if rec == nil {
		t.Fatalf("%s did not panic", what)
	}
	err, ok := rec.(error)
	if !ok || !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("%s panicked with %v (%T), want an error wrapping core.ErrInvalidConfig", what, rec, rec)
	}
}

func TestRegisterPanicsOnProgrammerErrors(t *testing.T) {
	r := registry.New()
	mustPanicInvalid(t, `Register("")`, func() { r.Register("", nop()) })
	mustPanicInvalid(t, `Register("*")`, func() { r.Register(registry.Wildcard, nop()) })
	mustPanicInvalid(t, `Register("A", nil)`, func() { r.Register("A", nil) })
	mustPanicInvalid(t, `RegisterType(nil)`, func() { r.RegisterType(nil, nop()) })
	mustPanicInvalid(t, `RegisterType(empty enum)`, func() { r.RegisterType(userEvent(""), nop()) })
	// A nil value of an event type: its Name is not called (it panicked
	// with a nil pointer dereference).
	mustPanicInvalid(t, `RegisterType((*pointerType)(nil))`, func() { r.RegisterType((*pointerType)(nil), nop()) })
	mustPanicInvalid(t, `RegisterAll(nil)`, func() { r.RegisterAll(nil) })
	mustPanicInvalid(t, `RegisterAllFunc(nil)`, func() { r.RegisterAllFunc(nil) })
	mustPanicInvalid(t, `RegisterFunc("A", nil)`, func() { r.RegisterFunc("A", nil) })
	if got := r.Types(); len(got) != 0 {
		t.Fatalf("panicking registrations changed the registry: Types() = %v", got)
	}
}

func TestRegisterChains(t *testing.T) {
	r := registry.New()
	got := r.Register("A", nop()).RegisterAll(nop()).RegisterType(userCreated, nop()).
		RegisterAllFunc(func(context.Context, core.Envelope) error { return nil })
	if got != r {
		t.Fatal("Register/RegisterAll/RegisterType must return the receiver for chaining")
	}
}

func TestListenersForCapEqualsLen(t *testing.T) {
	rec := &recorder{}
	r := registry.New()
	// Many exact listeners and wildcards, so allocation size classes would
	// leave spare capacity if the slices were not clipped.
	for i := range 17 {
		r.Register("A", rec.listener(fmt.Sprintf("A%d", i)))
	}
	for i := range 5 {
		r.RegisterAll(rec.listener(fmt.Sprintf("W%d", i)))
	}
	for _, typ := range []string{"A", "Unknown"} {
		ls := r.ListenersFor(typ)
		if cap(ls) != len(ls) {
			t.Fatalf("ListenersFor(%q): cap %d != len %d", typ, cap(ls), len(ls))
		}
		before := rec.run(t, ls)
		// Appending to the shared slice must copy, not write into the
		// registry's storage.
		grown := append(ls, rec.listener("INTRUDER"))
		_ = append(ls, rec.listener("INTRUDER2"))
		if len(grown) != len(ls)+1 {
			t.Fatalf("append misbehaved")
		}
		after := rec.run(t, r.ListenersFor(typ))
		if !slices.Equal(before, after) {
			t.Fatalf("ListenersFor(%q) changed after append by a caller: %v -> %v", typ, before, after)
		}
		if slices.Contains(after, "INTRUDER") || slices.Contains(after, "INTRUDER2") {
			t.Fatalf("append by a caller clobbered the registry: %v", after)
		}
	}
}

func TestSnapshotNotChangedByLaterRegistration(t *testing.T) {
	rec := &recorder{}
	r := registry.New()
	r.Register("A", rec.listener("A1"))
	r.RegisterAll(rec.listener("W1"))
	old := r.ListenersFor("A")
	oldWild := r.ListenersFor("Other")
	r.Register("A", rec.listener("A2"))
	r.RegisterAll(rec.listener("W2"))
	if got, want := rec.run(t, old), []string{"A1", "W1"}; !slices.Equal(got, want) {
		t.Fatalf("a slice returned earlier changed: ran %v, want %v", got, want)
	}
	if got, want := rec.run(t, oldWild), []string{"W1"}; !slices.Equal(got, want) {
		t.Fatalf("a wildcard slice returned earlier changed: ran %v, want %v", got, want)
	}
	if got, want := rec.run(t, r.ListenersFor("A")), []string{"A1", "A2", "W1", "W2"}; !slices.Equal(got, want) {
		t.Fatalf("ListenersFor(A) ran %v, want %v", got, want)
	}
}

func TestConcurrentRegisterAndListenersFor(t *testing.T) {
	r := registry.New()
	const writers, perWriter, readers = 8, 50, 8
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			typ := fmt.Sprintf("T%d", w%4)
			for range perWriter {
				r.Register(typ, nop())
				if w == 0 {
					r.RegisterAll(nop())
				}
			}
		}()
	}
	var rwg sync.WaitGroup
	for i := range readers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			typ := fmt.Sprintf("T%d", i%4)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ls := r.ListenersFor(typ)
				for _, l := range ls {
					if l == nil {
						t.Error("ListenersFor returned a nil listener")
						return
					}
				}
				if cap(ls) != len(ls) {
					t.Errorf("cap %d != len %d", cap(ls), len(ls))
					return
				}
				_ = r.Types()
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()

	wild := perWriter // writer 0 registered one wildcard per iteration
	for typ := range 4 {
		name := fmt.Sprintf("T%d", typ)
		exact := perWriter * (writers / 4)
		if got := len(r.ListenersFor(name)); got != exact+wild {
			t.Errorf("ListenersFor(%s) = %d listeners, want %d (no registration lost)", name, got, exact+wild)
		}
	}
	if got := len(r.ListenersFor("none")); got != wild {
		t.Errorf("wildcards = %d, want %d", got, wild)
	}
}

func TestTypesSortedIncludingWildcard(t *testing.T) {
	r := registry.New()
	r.Register("b", nop()).Register("C", nop()).Register("a", nop()).Register("b", nop())
	if got, want := r.Types(), []string{"C", "a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
	r.RegisterAll(nop())
	got := r.Types()
	if want := []string{"*", "C", "a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
	// The result is the caller's: modifying it must not affect the registry.
	got[0] = "zzz"
	if again := r.Types(); again[0] != registry.Wildcard {
		t.Fatalf("Types() result shares storage: %v", again)
	}
}

// pointerType is an event type whose nil pointer has no Name.
type pointerType struct{ name string }

func (p *pointerType) Name() string { return p.name }
