package registry_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/outbox-go/outbox/registry"
)

// Registering one more type costs the same with thousands registered:
// a registration does not copy the ones before it (10,000 types took 30 s
// when each did).
func TestRegisterDoesNotCopyEarlierRegistrations(t *testing.T) {
	r := registry.New()
	r.RegisterAll(nop())
	for i := range 2000 {
		r.Register(fmt.Sprintf("T%d", i), nop())
	}
	r.ListenersFor("T0") // a snapshot with the 2,000 types
	names := make([]string, 200)
	for i := range names {
		names[i] = fmt.Sprintf("New%d", i)
	}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		r.Register(names[i], nop())
		i++
	})
	if allocs > 10 {
		t.Fatalf("a registration with 2,000 types registered made %.0f allocations, want a few", allocs)
	}
	if got := len(r.ListenersFor(names[0])); got != 2 {
		t.Fatalf("ListenersFor(%s) has %d listeners, want its own and the wildcard", names[0], got)
	}
}

// Reads between registrations see each registration, whether the
// snapshot is rebuilt for a few types or, after a wildcard, for all.
func TestReadsBetweenRegistrationsSeeEveryOne(t *testing.T) {
	rec := &recorder{}
	r := registry.New()
	steps := []struct {
		register func()
		want     map[string][]string
	}{
		{func() { r.Register("A", rec.listener("A1")) }, map[string][]string{"A": {"A1"}, "B": nil}},
		{func() { r.Register("B", rec.listener("B1")) }, map[string][]string{"A": {"A1"}, "B": {"B1"}}},
		{func() { r.RegisterAll(rec.listener("W1")) }, map[string][]string{"A": {"A1", "W1"}, "B": {"B1", "W1"}, "C": {"W1"}}},
		{func() { r.Register("A", rec.listener("A2")) }, map[string][]string{"A": {"A1", "A2", "W1"}, "B": {"B1", "W1"}, "C": {"W1"}}},
		{func() {
			r.Register("C", rec.listener("C1"))
			r.RegisterAll(rec.listener("W2"))
			r.Register("B", rec.listener("B2"))
		}, map[string][]string{"A": {"A1", "A2", "W1", "W2"}, "B": {"B1", "B2", "W1", "W2"}, "C": {"C1", "W1", "W2"}, "D": {"W1", "W2"}}},
	}
	for i, s := range steps {
		s.register()
		for typ, want := range s.want {
			if got := rec.run(t, r.ListenersFor(typ)); !slices.Equal(got, want) {
				t.Fatalf("step %d: ListenersFor(%s) ran %v, want %v", i, typ, got, want)
			}
		}
	}
	if got, want := r.Types(), []string{"*", "A", "B", "C"}; !slices.Equal(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
}

// With a lookup after each registration, as on a running outbox whose
// dispatcher looks up every event, a registration does not copy every
// registered type either: registering 200 more types beside 5,000
// allocates far less than 200 copies of them (60 MB when each lookup
// copied the map; 10,000 types took 4 s so).
func TestRegisterBetweenLookupsDoesNotCopyEveryType(t *testing.T) {
	r := registry.New()
	for i := range 5000 {
		r.Register(fmt.Sprintf("T%d", i), nop())
	}
	r.ListenersFor("T0")
	names := make([]string, 200)
	for i := range names {
		names[i] = fmt.Sprintf("New%d", i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, n := range names {
		r.Register(n, nop())
		if len(r.ListenersFor(n)) != 1 {
			t.Fatalf("ListenersFor(%s) misses its listener", n)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 10<<20 {
		t.Fatalf("200 registrations with a lookup after each allocated %d MB, want a few", got>>20)
	}
}

// Every lookup sees every registration made before it, across the
// rebuilds that keep the recent types apart and those that merge them,
// and after a wildcard listener.
func TestLookupsBetweenManyRegistrations(t *testing.T) {
	rec := &recorder{}
	r := registry.New()
	const n = 3000
	for i := range n {
		typ := fmt.Sprintf("T%d", i%(n/2)) // each type registered twice
		r.Register(typ, rec.listener(fmt.Sprintf("%s-%d", typ, i/(n/2))))
		if i == n/3 {
			r.RegisterAll(rec.listener("W"))
		}
		want := []string{typ + "-0"}
		if i >= n/2 {
			want = append(want, typ+"-1")
		}
		if i >= n/3 {
			want = append(want, "W")
		}
		if got := rec.run(t, r.ListenersFor(typ)); !slices.Equal(got, want) {
			t.Fatalf("after registration %d: ListenersFor(%s) ran %v, want %v", i, typ, got, want)
		}
		if i%97 == 0 && i > 0 {
			// An earlier type, kept by whichever part of the snapshot.
			old := fmt.Sprintf("T%d", (i/2)%(n/2))
			if got := len(r.ListenersFor(old)); got == 0 {
				t.Fatalf("after registration %d: ListenersFor(%s) is empty", i, old)
			}
		}
	}
	if got := len(r.Types()); got != n/2+1 {
		t.Fatalf("Types() has %d entries, want %d types and the wildcard", got, n/2)
	}
}
