// Package registry maps event types to listeners.
//
// Listeners registered for an exact event type run first, then wildcard
// listeners registered with [Registry.RegisterAll] or
// [Registry.RegisterAllFunc], each group in
// registration order. Reads are lock-free (an immutable snapshot, rebuilt
// by the first read after registrations), so the dispatcher's per-event
// lookup costs a map read or two and no allocation, and registering n
// types costs O(n) in all, O(n√n) with lookups between the registrations
// (types registered on a running outbox).
package registry

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/nilval"
)

// Wildcard is the event type under which RegisterAll listeners are listed
// in [Registry.Types].
const Wildcard = "*"

// Registry holds listeners per event type. The zero value is not usable;
// call [New]. It is safe for concurrent use.
type Registry struct {
	mu sync.Mutex // serializes writers and the rebuilds of snap

	// Under mu: the listeners registered, and what changed since snap.
	exact       map[string][]core.Listener // per type, in registration order
	wildcard    []core.Listener
	changed     map[string]struct{} // types registered since snap
	wildChanged bool                // a wildcard registered since snap

	snap  atomic.Pointer[snapshot]
	stale atomic.Bool // registrations since snap: the next read rebuilds it
}

// snapshot is what readers see; it is never modified once published.
// A type's list (exact + wildcard listeners, capacity = length) is in
// recent when the type was registered since base was built, else in base:
// a rebuild after a few registrations copies recent alone, which stays
// small (see rebuild), so registrations with lookups between them do not
// copy every type each time.
type snapshot struct {
	wildcard []core.Listener // capacity = length
	base     map[string][]core.Listener
	recent   map[string][]core.Listener // nil when empty
}

// lookup returns the list of eventType and whether it was registered.
func (s *snapshot) lookup(eventType string) ([]core.Listener, bool) {
	if s.recent != nil {
		if ls, ok := s.recent[eventType]; ok {
			return ls, true
		}
	}
	ls, ok := s.base[eventType]
	return ls, ok
}

var _ core.ListenerSource = (*Registry)(nil)

// New returns an empty registry.
func New() *Registry {
	r := &Registry{exact: map[string][]core.Listener{}, changed: map[string]struct{}{}}
	r.snap.Store(&snapshot{base: map[string][]core.Listener{}})
	return r
}

// Register adds l for the event type name. It returns r for chaining and
// panics only on programmer errors: an empty type, the wildcard "*" (use
// RegisterAll), a type no event can have (see core.CheckEventType: over
// core.MaxEventTypeLen characters, invalid UTF-8, a NUL) or a nil
// listener.
func (r *Registry) Register(eventType string, l core.Listener) *Registry {
	if err := r.TryRegister(eventType, l); err != nil {
		panic(err)
	}
	return r
}

// RegisterFunc is Register with a function listener.
func (r *Registry) RegisterFunc(eventType string, fn func(ctx context.Context, env core.Envelope) error) *Registry {
	if fn == nil {
		return r.Register(eventType, nil) // panics: nil listener
	}
	return r.Register(eventType, core.ListenerFunc(fn))
}

// RegisterType adds l for a type-safe event type.
func (r *Registry) RegisterType(t core.EventType, l core.Listener) *Registry {
	name := ""
	if !nilval.Is(t) { // a nil value of a type: its Name is not called
		name = t.Name()
	}
	return r.Register(name, l)
}

// RegisterAll adds a wildcard listener that sees every event after the
// exact-type listeners.
func (r *Registry) RegisterAll(l core.Listener) *Registry {
	if isNil(l) {
		panic(fmt.Errorf("%w: registry: nil listener", core.ErrInvalidConfig))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wildcard = append(r.wildcard, l)
	r.wildChanged = true
	r.stale.Store(true)
	return r
}

// RegisterAllFunc is RegisterAll with a function listener.
func (r *Registry) RegisterAllFunc(fn func(ctx context.Context, env core.Envelope) error) *Registry {
	if fn == nil {
		panic(fmt.Errorf("%w: registry: nil listener", core.ErrInvalidConfig))
	}
	return r.RegisterAll(core.ListenerFunc(fn))
}

// TryRegister is Register returning an error (wrapping core.ErrInvalidConfig)
// instead of panicking, for listeners configured from data.
func (r *Registry) TryRegister(eventType string, l core.Listener) error {
	switch {
	case eventType == "":
		return fmt.Errorf("%w: registry: empty event type", core.ErrInvalidConfig)
	case eventType == Wildcard:
		return fmt.Errorf("%w: registry: use RegisterAll for the wildcard", core.ErrInvalidConfig)
	case core.CheckEventType(eventType) != nil:
		return fmt.Errorf("%w: registry: no event can have this type: %w", core.ErrInvalidConfig, core.CheckEventType(eventType))
	case isNil(l):
		return fmt.Errorf("%w: registry: nil listener for %q", core.ErrInvalidConfig, eventType)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exact[eventType] = append(r.exact[eventType], l)
	r.changed[eventType] = struct{}{}
	r.stale.Store(true)
	return nil
}

// ListenersFor returns the exact-type listeners of eventType followed by the
// wildcard listeners. The slice is shared and must not be modified (its
// capacity equals its length, so append copies).
func (r *Registry) ListenersFor(eventType string) []core.Listener {
	s := r.current()
	if ls, ok := s.lookup(eventType); ok {
		return ls
	}
	return s.wildcard
}

// Types returns the registered event types (Wildcard included when wildcard
// listeners exist), sorted.
func (r *Registry) Types() []string {
	s := r.current()
	out := make([]string, 0, len(s.base)+len(s.recent)+1)
	for t := range s.base {
		out = append(out, t)
	}
	for t := range s.recent {
		if _, ok := s.base[t]; !ok {
			out = append(out, t)
		}
	}
	if len(s.wildcard) > 0 {
		out = append(out, Wildcard)
	}
	slices.Sort(out)
	return out
}

// current returns the snapshot with every registration that returned
// before the call, rebuilding it when registrations came since the last
// one. stale is read before snap: a snapshot stored before stale was
// cleared holds every registration stale stood for.
func (r *Registry) current() *snapshot {
	if !r.stale.Load() {
		return r.snap.Load()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stale.Load() {
		r.snap.Store(r.rebuild())
		r.stale.Store(false)
	}
	return r.snap.Load()
}

// rebuild returns the snapshot of the registrations so far (under mu):
// after a wildcard registration every type's list anew; otherwise the
// lists of the types registered since are added to a copy of recent, or,
// once recent would outgrow about the square root of base's size, merged
// into a copy of base. A rebuild after k registrations thus copies
// O(k + √n) lists, O(n) only every √n registrations or so: registering n
// types costs O(n√n) in all even with a lookup after each (the dispatcher
// looks up every event), O(n) without.
func (r *Registry) rebuild() *snapshot {
	old := r.snap.Load()
	next := &snapshot{wildcard: old.wildcard, base: old.base}
	list := func(t string) []core.Listener { return slices.Clip(slices.Concat(r.exact[t], next.wildcard)) }
	switch {
	case r.wildChanged:
		next.wildcard = slices.Clip(slices.Clone(r.wildcard))
		next.base = make(map[string][]core.Listener, len(r.exact))
		for t := range r.exact {
			next.base[t] = list(t)
		}
	case len(old.recent)+len(r.changed) <= max(16, int(math.Sqrt(float64(len(old.base))))):
		next.recent = make(map[string][]core.Listener, len(old.recent)+len(r.changed))
		maps.Copy(next.recent, old.recent)
		for t := range r.changed {
			next.recent[t] = list(t)
		}
	default:
		next.base = make(map[string][]core.Listener, len(old.base)+len(old.recent)+len(r.changed))
		maps.Copy(next.base, old.base)
		maps.Copy(next.base, old.recent)
		for t := range r.changed {
			next.base[t] = list(t)
		}
	}
	clear(r.changed)
	r.wildChanged = false
	return next
}

// isNil reports whether l is nil or holds a nil value it would be called
// through (a nil core.ListenerFunc or a nil pointer): calling it would
// panic at every delivery.
func isNil(l core.Listener) bool { return nilval.Is(l) }
